"""``bench/commands.py``'s floors are the API calls their commands make: each read typed all
day is run against a control plane (in-process) holding an array ``sweep`` with workers running
and waiting, and the paths it asked for are those its ``curl`` floor asks for (the look for the
local server, ``/healthz``, aside: here the cluster is given). A command that asks differently
makes its floor stale, and this fails."""

from __future__ import annotations

import io
from pathlib import Path

import httpx
import pytest

from bench.commands import _commands
from reconciler.cli.app import run
from reconciler.clusters.http import HttpCluster

from .conftest import TOKEN, Client, Plane, until
from .test_api import tiny

URL = "http://astra.test"


@pytest.fixture
def asked(tmp_path, monkeypatch, capsys):
    """``astra ARGS`` against the plane; the paths it asked for."""
    plane = Plane(tmp_path / "plane")
    client = Client(plane)
    paths: list[str] = []

    def forward(req: httpx.Request) -> httpx.Response:
        paths.append(req.url.raw_path.decode())
        got = client.request(req.method, req.url.raw_path.decode(), headers=dict(req.headers),
                             content=req.content, token=None)  # fmt: skip
        return httpx.Response(got.status_code, headers=got.headers, content=got.content)

    cluster = HttpCluster(URL, TOKEN, transport=httpx.MockTransport(forward))
    monkeypatch.setattr("reconciler.cli.connect.connect", lambda server, token, **_: cluster)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    sweep = tiny("sweep", command="seq 1 3; sleep 60", array={"size": 4, "max_parallel": 2})
    assert client.post("/api/runs", json=sweep).status_code == 201
    until(lambda: plane.run("sweep").state == "Running", step=plane.step, what="sweep to run")

    def call(argv: list[str]) -> list[str]:
        paths.clear()
        assert run(argv) == 0, capsys.readouterr()
        return list(paths)

    yield call
    plane.close()


READS = [
    name for name in _commands("astra", URL, Path("planned")) if "help" not in name and "plan" not in name
]


@pytest.mark.parametrize("name", READS)
def test_a_reads_curl_floor_asks_what_the_command_asks(asked, name):
    argv, floor = _commands("astra", URL, Path("planned"))[name]
    assert floor is not None
    floor_paths = [a.removeprefix(URL) for a in floor if a.startswith(URL)]
    assert floor_paths[0] == "/healthz"
    assert asked(argv[1:]) == floor_paths[1:]
