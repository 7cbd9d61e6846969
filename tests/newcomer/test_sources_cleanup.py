"""A source left by a mistake is listed and deleted (``astra source list | delete``), with the same
words on every store; a mistyped path leaves none behind; a clone of a local checkout names its
sources without a double slash; plan and apply take paths as validate does."""

from __future__ import annotations

import io
import subprocess

import httpx
import pytest
from controlplane_api.conftest import TOKEN, Client, Plane

from reconciler.cli.app import run
from reconciler.clusters.fake import FakeCluster
from reconciler.clusters.http import HttpCluster
from reconciler.state import (
    InventoryEntry,
    MemorySourceStore,
    SqlSourceStore,
    StateError,
    default_source_name,
)


@pytest.fixture(params=["memory", "sql", "api"])
def store(request, tmp_path):
    if request.param == "memory":
        yield MemorySourceStore()
    elif request.param == "sql":
        yield SqlSourceStore(f"sqlite:///{tmp_path / 'state.db'}")
    else:
        plane = Plane(tmp_path)
        client = Client(plane)

        def forward(req: httpx.Request) -> httpx.Response:
            path, headers = req.url.raw_path.decode(), dict(req.headers)
            got = client.request(req.method, path, headers=headers, content=req.content, token=None)
            return httpx.Response(got.status_code, headers=got.headers, content=got.content)

        cluster = HttpCluster("http://astra.test", TOKEN, transport=httpx.MockTransport(forward))
        yield cluster.source_store()
        plane.close()


def test_every_store_deletes_a_source_alike(store):
    with pytest.raises(StateError, match=r"^no source named 'ghost'$"):
        store.delete("ghost")
    store.set_status("typo", {"state": "Stalled", "reason": "LoadFailed"})  # astra watch nosuchdir, before
    applying = store.lock("kept", "me@h:1", 1.0)  # as an apply writes its inventory
    store.record("kept", "a", InventoryEntry({"spec": {}}, 1.0, "a.yaml"))
    store.unlock("kept", applying.id)
    assert [s.name for s in store.sources()] == ["kept", "typo"]
    store.delete("typo")
    assert [s.name for s in store.sources()] == ["kept"]
    assert store.read("typo").status == {} and store.read("typo").inventory == {}
    with pytest.raises(StateError) as owns:
        store.delete("kept")
    assert str(owns.value) == (
        "source 'kept' owns 1 run (a): prune them first, or give --keep-runs to leave them on the "
        "cluster, owned by no source"
    )
    lock = store.lock("kept", "me@h:1", 5.0)
    with pytest.raises(StateError, match=rf"is locked by me@h:1 \(lock {lock.id}\).*force-unlock {lock.id}"):
        store.delete("kept", keep_runs=True)
    store.unlock("kept", lock.id)
    store.delete("kept", keep_runs=True)
    assert store.sources() == []
    store.set_status("typo", {"state": "Ready"})  # the name may be used again
    assert [s.name for s in store.sources()] == ["typo"]


def test_a_deleted_source_on_the_control_plane_never_reuses_a_version(tmp_path):
    plane = Plane(tmp_path)
    client = Client(plane)
    try:
        client.put("/api/sources/s/status", json={"state": "Ready"})
        client.put("/api/sources/s/status", json={"state": "Ready"})
        before = client.get("/api/sources/s").headers["etag"]
        assert client.delete("/api/sources/s").status_code == 204
        assert client.get("/api/sources/s").status_code == 404
        assert client.delete("/api/sources/s").status_code == 404
        client.put("/api/sources/s/status", json={"state": "Ready"})
        after = client.get("/api/sources/s")
        assert after.json()["resource_version"] == 4 and after.headers["etag"] != before
    finally:
        plane.close()


@pytest.fixture
def cli(monkeypatch, capsys, tmp_path):
    cluster = FakeCluster()
    monkeypatch.setattr("reconciler.cli.connect.connect", lambda server, token, **_: cluster)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    monkeypatch.chdir(tmp_path)

    def call(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = run(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return call


def test_a_mistyped_path_leaves_no_source_and_a_stale_one_is_deleted(cli, tmp_path):
    assert cli("watch", "nosuchdir", "--once") == (1, "", "astra: error: nosuchdir: no such file or folder\n")
    assert cli("plan", "-f", "nosuchdir")[2] == "astra: error: nosuchdir: no such file or folder\n"
    assert cli("source", "list") == (0, "no sources in memory://\n", "")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "a.yaml").write_text("metadata: {name: a}\nspec: {task_template: {image: x}}\n")
    code, out, err = cli("apply", "runs", "--yes", "--source", "mine")  # a path without -f, as validate
    assert code == 0, err
    code, out, _ = cli("source", "list")
    assert out.splitlines()[0].split() == ["NAME", "RUNS", "STATE", "LOCK", "LAST", "APPLY"]
    assert out.splitlines()[1].split()[:4] == ["mine", "1", "Ready", "-"]  # an apply says it is Ready
    code, _, err = cli("source", "delete", "mine")
    assert code == 1 and "owns 1 run (a)" in err
    assert cli("source", "delete", "mine", "--keep-runs") == (0, "source mine deleted\n", "")
    assert cli("source", "list")[1] == "no sources in memory://\n"


def test_a_server_url_without_a_host_is_said_so(capsys):
    assert run(["plan", "-f", ".", "--server", "http://"]) == 1
    err = capsys.readouterr().err
    assert err == "astra: error: cannot use server 'http://': the URL names no host (http://HOST:PORT)\n"


def git(*args: str, cwd) -> None:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
    }
    subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, env={**env, "PATH": "/usr/bin:/bin"}
    )


def test_a_clone_of_a_local_checkout_names_its_sources_without_a_double_slash(tmp_path):
    origin = tmp_path / "origin"
    (origin / "examples" / "laptop").mkdir(parents=True)
    (origin / "examples" / "laptop" / "a.yaml").write_text("metadata: {name: a}\n")
    git("init", "-q", cwd=origin)
    git("add", "-A", cwd=origin)
    git("commit", "-qm", "x", cwd=origin)
    git("clone", "-q", str(origin), "clone", cwd=tmp_path)
    clone = tmp_path / "clone"
    assert default_source_name([clone / "examples" / "laptop"]) == f"{origin.resolve()}/examples/laptop"
    assert default_source_name([clone]) == str(origin.resolve())
    git("remote", "set-url", "origin", "git@github.com:acme/runs.git", cwd=clone)
    assert default_source_name([clone / "examples"]) == "git@github.com:acme/runs.git//examples"
