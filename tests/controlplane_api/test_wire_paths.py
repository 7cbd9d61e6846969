"""Where the API is: ``api_base`` (one rule, for the CLI and the http cluster alike), and a source's
name made one path segment before routing (``source_paths.canonical_path``)."""

from __future__ import annotations

from urllib.parse import unquote

import pytest

from reconciler.clusters import http
from reconciler.controlplane.api.source_paths import canonical_path
from reconciler.wire import api_base

from .conftest import LONG


@pytest.mark.parametrize(
    ("server", "base"),
    [
        ("http://h:1", "http://h:1/api"),
        ("http://h:1/", "http://h:1/api"),
        ("http://h:1/api", "http://h:1/api"),
        ("http://h:1/api/", "http://h:1/api"),
        (f"https://c.example{LONG}", f"https://c.example{LONG}"),
        (f"https://c.example{LONG}/", f"https://c.example{LONG}"),
        # /api elsewhere than at the end is not the API's root: a server mounted under a proxy's /api
        ("http://proxy/api/astra", "http://proxy/api/astra/api"),
        ("http://h/apis", "http://h/apis/api"),
        ("http://h/api-gateway", "http://h/api-gateway/api"),
    ],
)
def test_the_api_is_at_a_path_that_ends_in_api(server, base):
    assert api_base(server) == base


def test_the_http_cluster_and_the_cli_read_the_one_rule():
    assert http.api_base is api_base  # the CLI's remote calls import it from there


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ("/api/sources/s", "/api/sources/s"),
        ("/api/sources/s/runs/a", "/api/sources/s/runs/a"),
        ("/api/sources/s/lock", "/api/sources/s/lock"),
        # encoded whole: one segment, whatever it ends with
        ("/api/sources/a%2Fruns", "/api/sources/a%2Fruns"),
        ("/api/sources/a%2Fruns/runs", "/api/sources/a%2Fruns/runs"),
        (
            "/api/sources/https%3A%2F%2Fg.com%2Fr.git%2F%2Fruns/lock",
            "/api/sources/https%3A%2F%2Fg.com%2Fr.git%2F%2Fruns/lock",
        ),
        # sent plain: a trailing sub-resource is the sub-resource, the rest is the name
        ("/api/sources/g.com/acme/runs", "/api/sources/g.com%2Facme/runs"),
        ("/api/sources/g.com/acme//deploy", "/api/sources/g.com%2Facme%2F%2Fdeploy"),
        ("/api/sources/g.com/acme//deploy/lock", "/api/sources/g.com%2Facme%2F%2Fdeploy/lock"),
        ("/api/sources/x/runs/runs/b", "/api/sources/x%2Fruns/runs/b"),
        ("/api/sources/a/lock/runs", "/api/sources/a%2Flock/runs"),
        ("/api/sources/s/foo/bar", "/api/sources/s%2Ffoo%2Fbar"),
        (f"{LONG}/sources/g.com/acme/status", f"{LONG}/sources/g.com%2Facme/status"),
    ],
)
def test_a_source_name_becomes_one_segment(raw, path):
    assert canonical_path(unquote(raw), raw.encode()) == path


def test_paths_that_name_no_source_are_left_alone():
    assert canonical_path("/api/sources", b"/api/sources") is None
    assert canonical_path("/api/sources/", b"/api/sources/") is None
    assert canonical_path("/api/runs/sources/x", b"/api/runs/sources/x") is None
