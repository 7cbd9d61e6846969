"""The http cluster and the API source store, against ``httpx.MockTransport`` speaking CONTRACT §5."""

from __future__ import annotations

import json
from urllib.parse import unquote

import httpx
import pytest

from reconciler.clusters.base import ClusterError, Conflict, NotFound, Rejected, Unreachable
from reconciler.clusters.http import HttpCluster, api_base
from reconciler.state import HistoryEntry, InventoryEntry, Locked, SourceState, StateError


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
        """The sources as CONTRACT §5 words them: whole GET (ETag, 304), granular writes, the lock."""
        method = request.method
        if rest is None:
            return httpx.Response(200, json={"items": [self.sources[n] for n in sorted(self.sources)]})
        # the name is one percent-encoded segment, as the client sends it
        segments = request.url.raw_path.decode().split("?")[0].split("/")[3:]
        name, sub = unquote(segments[0]), [unquote(x) for x in segments[1:]]
        src = self.sources.get(name)
        if method == "GET" and not sub:
            if src is None:
                return httpx.Response(404, json={"detail": "none"})
            tag = _tag(src)
            if request.headers.get("if-none-match") == tag:
                return httpx.Response(304, headers={"ETag": tag})
            return httpx.Response(200, json=src, headers={"ETag": tag})
        if method == "GET" and sub == ["runs"]:  # as a server without digests: ?view is not read
            if src is None:
                return httpx.Response(404, json={"detail": "none"})
            wanted = request.url.params.get_list("run")
            items = {r: e for r, e in src["inventory"].items() if not wanted or r in wanted}
            return httpx.Response(
                200, json={"name": name, "resource_version": src["resource_version"], "items": items}
            )
        if src is None:
            src = self.sources[name] = {
                "name": name,
                "resource_version": 0,
                "lock": None,
                "inventory": {},
                "status": {},
                "history": [],
            }
        if sub == ["lock"]:
            if method == "POST":
                if src["lock"]:
                    return httpx.Response(409, json={"detail": "locked", "lock": src["lock"]})
                src["lock"] = {"id": body["id"], "owner": body["owner"], "created_at": 5.0}
                return httpx.Response(201, json=src["lock"], headers={"ETag": _tag(src)})
            if not src["lock"]:
                return httpx.Response(404, json={"detail": "not locked"})
            if src["lock"]["id"] != request.url.params.get("id"):
                return httpx.Response(409, json={"detail": "other", "lock": src["lock"]})
            src["lock"] = None
            return httpx.Response(204, headers={"ETag": _tag(src)})
        needs_lock = sub[0] in ("runs", "history")
        given = request.headers.get("x-astra-lock")
        held = (src["lock"] or {}).get("id")
        if (needs_lock or given) and (held is None or given != held):
            return httpx.Response(409, json={"detail": "not your lock", "lock": src["lock"]})
        if sub[0] == "runs" and method == "PUT":
            src["inventory"][sub[1]] = body
        elif sub[0] == "runs" and method == "DELETE":
            if sub[1] not in src["inventory"]:
                return httpx.Response(404, json={"detail": "not in the inventory"})
            del src["inventory"][sub[1]]
        elif sub == ["status"] and method == "PUT":
            src["status"] = body
        elif sub == ["history"] and method == "POST":
            src["history"] = [*src["history"], body][-100:]
        else:
            return httpx.Response(405, json={"detail": "no such route"})
        src["resource_version"] += 1
        return httpx.Response(
            201 if method == "POST" else 200,
            json={"name": name, "resource_version": src["resource_version"]},
            headers={"ETag": _tag(src)},
        )


def _tag(src: dict) -> str:
    return f'"{src["resource_version"]}-{(src["lock"] or {}).get("id", "")}"'


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
    lock = store.lock(name, "me@h:1", 5.0)
    store.record(name, "train", InventoryEntry({"metadata": {"name": "train"}}, 3.0, "a.yaml"))
    store.set_status(name, {"state": "Ready"})
    state = store.read(name)
    assert state.inventory["train"].file == "a.yaml" and state.status == {"state": "Ready"}
    assert state.resource_version == 2
    assert "%2F" in str(api.seen[-1].url.raw_path)  # the name is one path segment
    with pytest.raises(Locked) as locked:
        store.lock(name, "you@h:2", 6.0)
    assert locked.value.lock == lock
    with pytest.raises(StateError, match="locked under"):
        store.unlock(name, "wrong")
    store.unlock(name, lock.id)
    with pytest.raises(StateError, match="holds no lock"):
        store.unlock(name, lock.id)
    assert [s.name for s in store.sources()] == [name]


def test_each_write_is_one_small_call_under_the_lock(cluster, api):
    store = cluster.source_store()
    lock = store.lock("s", "me@h:1", 5.0)
    api.seen.clear()
    store.record("s", "r", InventoryEntry({"spec": {}}, 1.0, "r.yaml"))
    store.record("s", "gone", None)  # not there: 404, taken as forgotten already
    store.add_history("s", HistoryEntry("me", 2.0, None, {"create": 1}, "applied"))
    store.set_status("s", {"state": "Ready"})
    calls = [(r.method, r.url.raw_path.decode().removeprefix("/api/sources/")) for r in api.seen]
    assert calls == [
        ("PUT", "s/runs/r"),
        ("DELETE", "s/runs/gone"),
        ("POST", "s/history"),
        ("PUT", "s/status"),
    ]
    assert all(r.headers["x-astra-lock"] == lock.id for r in api.seen)
    assert json.loads(api.seen[0].content) == {"spec": {"spec": {}}, "applied_at": 1.0, "file": "r.yaml"}
    store.unlock("s", lock.id)
    with pytest.raises(StateError, match="refused the write"):  # no lock held: the server says no
        store.record("s", "r", None)


def test_a_read_is_answered_304_while_only_this_store_wrote(cluster, api):
    store = cluster.source_store()
    lock = store.lock("s", "me@h:1", 5.0)
    store.record("s", "a", InventoryEntry({"x": 1}, 1.0))
    store.unlock("s", lock.id)
    first = store.read("s")  # the whole source, once
    lock = store.lock("s", "me@h:1", 6.0)
    store.record("s", "b", InventoryEntry({"x": 2}, 2.0))
    store.set_status("s", {"state": "Ready"})
    store.unlock("s", lock.id)
    api.seen.clear()
    again = store.read("s")
    assert api.seen[-1].headers["if-none-match"] and list(again.inventory) == ["a", "b"]
    assert again.status == {"state": "Ready"} and again.resource_version == first.resource_version + 2
    again.inventory.clear()  # a copy: what the store keeps is its own
    assert list(store.read("s").inventory) == ["a", "b"]
    # another writer comes in between: the tag no longer matches, the next read is whole
    lock = store.lock("s", "me@h:1", 7.0)
    api.sources["s"]["inventory"]["c"] = {"spec": {}, "applied_at": 3.0, "file": None}
    api.sources["s"]["resource_version"] += 1
    store.record("s", "d", InventoryEntry({"x": 4}, 4.0))
    assert sorted(store.read("s").inventory) == ["a", "b", "c", "d"]
    assert store.read("s").lock == lock


def test_under_its_lock_a_read_is_answered_without_a_call_when_the_lock_confirmed_the_state(cluster, api):
    store = cluster.source_store()
    store.set_status("s", {"state": "Ready"})
    store.read("s")
    lock = store.lock("s", "me@h:1", 5.0)  # its answer's tag: nobody wrote since the read
    api.seen.clear()
    state = store.read("s")
    assert api.seen == [] and state.lock == lock and state.status == {"state": "Ready"}
    store.record("s", "a", InventoryEntry({"x": 1}, 1.0))
    assert list(store.read("s").inventory) == ["a"] and len(api.seen) == 1  # the write alone
    store.unlock("s", lock.id)
    api.sources["s"]["inventory"]["b"] = {"spec": {}, "applied_at": 2.0, "file": None}
    api.sources["s"]["resource_version"] += 1  # another writer, before the next lock
    store.lock("s", "me@h:1", 6.0)
    assert sorted(store.read("s").inventory) == ["a", "b"]  # the lock's tag said so: read whole
