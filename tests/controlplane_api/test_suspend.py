"""A suspended source (``astra source suspend``): its watch runs no pass, whatever comes (a push
at the resync, a signed webhook call, a broken file); the webhook answers 409 and counts nothing;
the status, ``astra status`` and the console say so; resumed, the next pass is a full one at the
newest commit. Real git (a bare repository on disk), the control plane over ASGI, a simulated
clock."""

from __future__ import annotations

import hashlib
import hmac
import json
import random

import httpx
import pytest

from reconciler.cli.app import run
from reconciler.clusters.fake import FakeCluster
from reconciler.clusters.http import HttpCluster
from reconciler.git import Remote
from reconciler.loop import HookEvents, Reconciler, RemoteOrigin, Watch
from reconciler.loop.suspended import SUSPEND_POLL
from reconciler.reconcile import Source
from reconciler.state import MemorySourceStore, SqlSourceStore
from reconciler.state.suspension import Suspension
from tests.sources.conftest import ENV, Repo

from .conftest import TOKEN, Client, Plane
from .test_sources import wire  # noqa: F401 (a fixture)

SECRET = "a-secret-of-some-length"
BODY = json.dumps({"ref": "refs/heads/main"}).encode()
NOW = 1_700_000_000.0


def signed(body: bytes) -> dict[str, str]:
    return {"X-Hub-Signature-256": "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()}


@pytest.fixture
def repo(tmp_path, monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    (tmp_path / "git").mkdir()
    return Repo(tmp_path / "git")


def names(cluster) -> list[str]:
    return sorted(r.name for r in cluster.list_runs())


def revision(cluster, name: str) -> str:
    return cluster.get_run(name).document["metadata"]["annotations"]["astra.revision"]


def test_a_suspended_source_ignores_a_push_and_a_webhook_and_resumes_at_the_newest_commit(
    client,
    wire,  # noqa: F811
    repo,
):
    cluster, _ = wire
    store = cluster.source_store()
    store.set_hook_secret("remote", SECRET)
    clock = [NOW]
    repo.run("a")
    first = repo.commit("first")
    repo.push()
    reconciler = Reconciler(
        Source("remote", ("runs",), prune=True, probe=False),
        cluster,
        store,
        clock=lambda: clock[0],
        who="watch",
        origin=RemoteOrigin(Remote(repo.url, "main", home=repo.root / "home"), "runs"),
        rng=random.Random(1),
    )
    hooks = HookEvents(["remote"], store.hook_count, poll=2.0, sleep=lambda s: None, clock=lambda: clock[0])
    said: list[dict] = []
    watch = Watch(
        reconciler, hooks.single("remote"), interval=60.0, clock=lambda: clock[0], on_status=said.append
    )
    assert watch.act(set())["state"] == "Ready" and revision(cluster, "a") == f"main@sha1:{first}"

    suspended = client.put("/api/sources/remote/suspend", json={"by": "ada", "reason": "fixing the images"})
    assert suspended.status_code == 200
    held = suspended.json()["suspended"]
    assert held == {"by": "ada", "at": held["at"], "reason": "fixing the images"}

    # a push that deletes a and adds b (prune is on), and a broken file: nothing of it is applied
    (repo.work / "runs" / "a.yaml").unlink()
    repo.run("b")
    repo.write("runs/broken.yaml", "metadata: [\n")
    repo.commit("b, a gone, a broken file")
    repo.push()
    refused = client.post("/api/sources/remote/hook", content=BODY, token=None, headers=signed(BODY))
    assert refused.status_code == 409 and "suspended" in refused.json()["detail"]
    assert client.get("/api/sources/remote/hook").json()["count"] == 0  # not counted
    clock[0] = watch.wake_at()  # the resync
    held = watch.act(set())
    assert held["state"] == "Suspended" and "suspended by ada: fixing the images" in held["message"]
    assert said[-1] is held
    for _ in range(3):  # a pass is asked for (the resync, a trigger): none runs, nothing is said again
        look = watch.wake_at()
        assert 0 < look - clock[0] <= SUSPEND_POLL  # looked at again soon: no retry, no resync
        clock[0] = look
        assert watch.act({"\0trigger"}) is None
    assert names(cluster) == ["a"] and revision(cluster, "a") == f"main@sha1:{first}"
    status = store.read("remote").status
    assert status["state"] == "Ready" and status["suspended"]["by"] == "ada"  # the loop wrote nothing
    page = client.get("/o/default/w/default/sources")  # the console takes the bearer token too
    assert "Suspended" in page.text and "fixing the images" in page.text

    # fixed and pushed while suspended, then resumed: one full pass at the newest commit
    (repo.work / "runs" / "broken.yaml").unlink()
    newest = repo.commit("the broken file removed")
    repo.push()
    assert client.delete("/api/sources/remote/suspend").json() == {"name": "remote", "suspended": None}
    clock[0] = watch.wake_at()
    status = watch.act(set())
    assert status["state"] == "Ready" and status["revision"] == f"main@sha1:{newest}"
    assert names(cluster) == ["b"] and revision(cluster, "b") == f"main@sha1:{newest}"
    assert "suspended" not in store.read("remote").status


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


def test_every_store_keeps_the_suspension_through_the_status_a_pass_writes_until_resume(store):
    held = Suspension("ada", NOW, "why").to_json()
    store.suspend("s", held)
    store.set_status("s", {"state": "Ready", "reason": "ReconciliationSucceeded", "suspended": None})
    kept = store.suspension("s")  # the control plane stamps it with its own clock
    assert kept is not None and (kept["by"], kept["reason"]) == ("ada", "why")
    assert store.read("s").status["state"] == "Ready"
    assert store.read("s").status["suspended"] == kept  # the status says it (astra status, the console)
    store.suspend("s", None)
    assert store.suspension("s") is None
    assert store.read("s").status == {"state": "Ready", "reason": "ReconciliationSucceeded"}


def test_astra_source_suspend_and_resume_say_so_and_status_shows_it(monkeypatch, capsys, tmp_path):
    cluster = FakeCluster()
    monkeypatch.setattr("reconciler.cli.connect.connect", lambda server, token, **_: cluster)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "astra.yaml").write_text("sources: [\n")  # broken: suspend reads no file

    def cli(*argv: str) -> tuple[int, str]:
        capsys.readouterr()
        code = run(list(argv))
        return code, capsys.readouterr().out

    assert cli("source", "suspend", "team", "--reason", "broken config") == (
        0,
        "source team suspended: no pass runs until 'astra source resume team'\n",
    )
    code, out = cli("status")
    row = out.splitlines()[1]
    assert code == 0 and row.split()[:3] == ["team", "Suspended", "Suspended"]
    assert "broken config" in row and "astra source resume team" in row
    assert cli("source", "list")[1].splitlines()[1].split()[:3] == ["team", "0", "Suspended"]
    assert cli("source", "resume", "team") == (
        0,
        "source team resumed: its watch's next pass is a full one\n",
    )
    assert cluster.source_store().suspension("team") is None
