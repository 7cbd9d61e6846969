"""The control plane's REST API as it crosses the wire (CONTRACT §5): where it is, and its shapes.

Owns the one statement of the API's shapes, read by the API (``reconciler.controlplane.api``),
its clients (``reconciler.clusters.http``) and the published ``/openapi.json``:

* here, without pydantic (so that ``astra plan``, which talks to the API on every run, imports
  none): where the API is (``api_base``, the two base paths) and the header names;
* ``reconciler.wire.models``: a pydantic model for every request and response (runs, workers and
  logs, sources, errors, health). The API declares them as its routes' request and response
  models; the client's decoders (``clusters/http.py``) are their pydantic-free twins, held equal
  to them by ``tests/controlplane_api/test_wire_twins.py``.

Must not touch: HTTP, the store, the scheduler. Nothing here talks to a server.

The base paths (both serve every route)::

    /api/v1/orgs/{org}/workspaces/{workspace}/clusters/{cluster}/api   ($WS_API)
    /api                                        (the default org, workspace and cluster)
"""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = [
    "API",
    "BATCH_MAX",
    "BATCH_PATH",
    "CONSOLE_RUNS",
    "LOCK_HEADER",
    "PLACEMENT_PATH",
    "WS_API",
    "api_base",
    "console_url",
]

#: The default org, workspace and cluster's API, under a server's root.
API = "/api"
#: A workspace's view of a cluster (``$WS_API`` in the seeds), under a server's root.
WS_API = "/api/v1/orgs/{org}/workspaces/{workspace}/clusters/{cluster}/api"
#: Many runs created in one request (``wire.batch``), under a base path; ``/jobs:batch`` too.
BATCH_PATH = "/runs:batch"
#: Where runs would start if submitted now, changing nothing (``wire.placement``); ``/jobs:placement`` too.
PLACEMENT_PATH = "/runs:placement"
#: The most run documents one batch may hold.
BATCH_MAX = 1000
#: The console's Runs page of a workspace on a cluster (a run's page: this and its name), the
#: seeds' console URL.
CONSOLE_RUNS = "/o/{org}/w/{workspace}/jobs/{cluster}"
#: The header a write under a source's apply lock names that lock in.
LOCK_HEADER = "X-Astra-Lock"


def api_base(server: str) -> str:
    """The API's base URL for a server URL: the URL itself when its path ENDS in an ``api``
    segment (``http://h:1/api``, or a workspace's ``…/clusters/{cluster}/api``: both base paths
    end so), else ``URL/api`` (the default org, workspace and cluster).

    ``/api`` elsewhere in the path does not count: ``http://proxy/api/astra`` is a server mounted
    under a proxy's ``/api``, whose API is ``http://proxy/api/astra/api``; ``/apis`` is no API."""
    server = server.rstrip("/")
    return server if urlsplit(server).path.rsplit("/", 1)[-1] == "api" else server + API


def console_url(run_url: str) -> str:
    """A run's console page for its API URL (``status.url``: ``ROOT$WS_API/runs/NAME``):
    ``ROOT/o/ORG/w/WORKSPACE/jobs/CLUSTER/NAME``; a URL of another form is given back as it is."""
    head, sep, name = run_url.rpartition("/runs/")
    parts = head.rsplit("/", 9)
    # ROOT, "api", "v1", "orgs", ORG, "workspaces", WORKSPACE, "clusters", CLUSTER, "api"
    if not sep or len(parts) != 10 or parts[1:4] != ["api", "v1", "orgs"] or parts[9] != "api":
        return run_url
    if parts[5] != "workspaces" or parts[7] != "clusters":
        return run_url
    where = CONSOLE_RUNS.format(org=parts[4], workspace=parts[6], cluster=parts[8])
    return f"{parts[0]}{where}/{name}"
