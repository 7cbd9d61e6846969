"""The http cluster and the API source store, against ``httpx.MockTransport`` speaking CONTRACT §5."""

from __future__ import annotations

import json
from urllib.parse import unquote

import httpx
import pytest

from reconciler.clusters.base import ClusterError, Conflict, NotFound, Rejected, Unreachable
from reconciler.clusters.http import HttpCluster, api_base
from reconciler.state import InventoryEntry, Locked, SourceState, StateError


class Api:
    """A tiny in-memory control plane: runs and sources, as the contract words them."""

    def __init__(self):
        self.runs: dict[str, dict] = {}
        self.sources: dict[str, dict] = {}
        self.seen: list[httpx.Request] = []
        self.down = False
        self.race = 0  # PUTs that another writer beats

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        if self.down:
            raise httpx.ConnectError("connection refused", request=request)
        if request.headers.get("authorization") != "Bearer T":
            return httpx.Response(401, json={"detail": "no token"})
        path = unquote(request.url.raw_path.decode().split("?")[0])
        assert path.startswith("/api/")
        parts = path.removeprefix("/api/").split("/", 1)
        body = json.loads(request.content) if request.content else None
        if parts[0] == "runs":
            return self.run_route(request.method, parts[1] if len(parts) > 1 else None, body)
        return self.source_route(request, parts[1] if len(parts) > 1 else None, body)

    def run_route(self, method, rest, body):
        if rest is None and method == "GET":
            return httpx.Response(200, json={"items": list(self.runs.values())})
        if rest is None and method == "POST":
            name = body["metadata"]["name"]
            if name in self.runs:
                return httpx.Response(409, json={"detail": f"run {name} exists"})
            if body["spec"].get("array", {}).get("size") == 0:
                return httpx.Response(
                    422, json=[{"path": "spec.array.size", "message": "array.size must be from 1 to 10000"}]
                )
            run = {
                **body,
                "metadata": {**body["metadata"], "resource_version": 1},
                "status": {"state": "Pending", "reason": "", "created_at": "2023-11-14T22:13:20Z"},
                "task_counts": {},
            }
            self.runs[name] = run
            return httpx.Response(201, json=run)
        name, _, sub = rest.partition("/")
        run = self.runs.get(name)
        if run is None:
            return httpx.Response(404, json={"detail": f"no run {name}"})
        if sub == "workers":
            return httpx.Response(
                200,
                json={
                    "items": [
                        {"name": f"{name}-0", "rank": 0, "state": "Running", "gpus": 8, "started_at": 100.0}
                    ]
                },
            )
        if method == "GET":
            return httpx.Response(200, json=run)
        if method == "PUT":
            if body["metadata"].get("resource_version") != run["metadata"]["resource_version"]:
                return httpx.Response(409, json={"detail": "stale"})
            run.update(spec=body["spec"])
            run["metadata"]["resource_version"] += 1
            return httpx.Response(200, json=run)
        if method == "DELETE":
            return httpx.Response(200, json=self.runs.pop(name))
        return httpx.Response(405)

    def source_route(self, request, rest, body):
        method = request.method
        if rest is None:
            return httpx.Response(200, json={"items": [self.sources[n] for n in sorted(self.sources)]})
        lock = rest.endswith("/lock")
        name = rest.removesuffix("/lock")
        src = self.sources.get(name)
        if not lock:
            if method == "GET":
                return httpx.Response(200, json=src) if src else httpx.Response(404, json={"detail": "none"})
            if self.race and src:
                self.race -= 1
                src["resource_version"] += 1
            current = src["resource_version"] if src else 0
            if body.get("resource_version", 0) != current:
                return httpx.Response(409, json={"detail": "stale", "resource_version": current})
            data = {k: v for k, v in body.items() if k not in ("name", "resource_version", "lock")}
            self.sources[name] = {
                **data,
                "name": name,
                "resource_version": current + 1,
                "lock": src["lock"] if src else None,
            }
            return httpx.Response(200, json=self.sources[name])
        src = self.sources.setdefault(name, {"name": name, "resource_version": 0, "lock": None})
        if method == "POST":
            if src["lock"]:
                return httpx.Response(409, json={"detail": "locked", "lock": src["lock"]})
            src["lock"] = {"id": body["id"], "owner": body["owner"], "created_at": 5.0}
            return httpx.Response(201, json=src["lock"])
        if not src["lock"]:
            return httpx.Response(404, json={"detail": "not locked"})
        if src["lock"]["id"] != request.url.params.get("id"):
            return httpx.Response(409, json={"detail": "other", "lock": src["lock"]})
        src["lock"] = None
        return httpx.Response(204)


@pytest.fixture
def api():
    return Api()


@pytest.fixture
def cluster(api):
    return HttpCluster("http://astra.test:8750", "T", transport=httpx.MockTransport(api))


DOC = {"metadata": {"name": "train"}, "spec": {"task_template": {"image": "x"}}}


def test_api_base():
    assert api_base("http://h:1") == "http://h:1/api"
    ws = "https://c.example/api/v1/orgs/o/workspaces/w/clusters/c/api"
    assert api_base(ws + "/") == ws


def test_runs_round_trip(cluster, api):
    created = cluster.create_run({**DOC, "metadata": {"name": "train", "resource_version": 9}})
    assert (created.name, created.resource_version, created.state) == ("train", 1, "Pending")
    assert created.created_at == 1_700_000_000.0
    assert "resource_version" not in json.loads(api.seen[-1].content)["metadata"]
    assert [r.name for r in cluster.list_runs()] == ["train"]
    updated = cluster.update_run("train", {**DOC, "spec": {"task_template": {"image": "y"}}}, 1)
    assert updated.resource_version == 2
    assert json.loads(api.seen[-1].content)["metadata"]["resource_version"] == 1
    (w,) = cluster.workers("train")
    assert (w.name, w.gpus, w.started_at) == ("train-0", 8, 100.0)
    cluster.delete_run("train")
    assert cluster.get_run("train") is None


def test_errors_map_to_the_protocol(cluster, api):
    cluster.create_run(DOC)
    with pytest.raises(Conflict) as clash:
        cluster.create_run(DOC)
    assert isinstance(clash.value.__cause__, httpx.HTTPStatusError)
    with pytest.raises(Conflict):
        cluster.update_run("train", DOC, 7)
    with pytest.raises(NotFound):
        cluster.delete_run("nope")
    with pytest.raises(Rejected) as rejected:
        cluster.create_run({"metadata": {"name": "bad"}, "spec": {"array": {"size": 0}}})
    assert rejected.value.errors == [
        {"path": "spec.array.size", "message": "array.size must be from 1 to 10000"}
    ]
    assert "array.size must be from 1 to 10000" in str(rejected.value)
    api.down = True
    with pytest.raises(Unreachable) as down:
        cluster.list_runs()
    assert isinstance(down.value.__cause__, httpx.ConnectError)


def test_no_token_is_one_clear_error(api):
    anonymous = HttpCluster("http://astra.test", None, transport=httpx.MockTransport(api))
    with pytest.raises(ClusterError, match="give --token or ASTRA_TOKEN"):
        anonymous.list_runs()


def test_api_source_store(cluster, api):
    store = cluster.source_store()
    name = "https://github.com/acme/runs.git//examples"
    assert store.read(name) == SourceState(name)
    store.record(name, "train", InventoryEntry({"metadata": {"name": "train"}}, 3.0, "a.yaml"))
    store.set_status(name, {"state": "Ready"})
    state = store.read(name)
    assert state.inventory["train"].file == "a.yaml" and state.status == {"state": "Ready"}
    assert state.resource_version == 2
    assert "%2F" in str(api.seen[-1].url.raw_path)  # the name is one path segment
    lock = store.lock(name, "me@h:1", 5.0)
    with pytest.raises(Locked) as locked:
        store.lock(name, "you@h:2", 6.0)
    assert locked.value.lock == lock
    with pytest.raises(StateError, match="locked under"):
        store.unlock(name, "wrong")
    store.unlock(name, lock.id)
    with pytest.raises(StateError, match="holds no lock"):
        store.unlock(name, lock.id)
    assert [s.name for s in store.sources()] == [name]


def test_a_concurrent_source_write_is_read_again(cluster, api):
    store = cluster.source_store()
    store.set_status("s", {"state": "Ready"})
    api.race = 2  # another writer comes first, twice
    store.record("s", "r", InventoryEntry({}, 1.0))
    assert list(store.read("s").inventory) == ["r"]
    puts = [r for r in api.seen if r.method == "PUT"]
    assert len(puts) == 4  # the first write, then three tries of the second
