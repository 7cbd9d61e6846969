"""A source's state on the control plane: one row per (source, run), granular writes under the lock,
conditional reads, the migration from schema 2, and an apply that costs O(N) small calls."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
import stamina
from sqlalchemy import text, update

from reconciler.apply import apply_plan
from reconciler.clusters.apisources import ApiSourceStore
from reconciler.clusters.http import HttpCluster
from reconciler.controlplane.store import SCHEMA_VERSION, SchemaVersion, Store
from reconciler.load import load_source
from reconciler.loop import Reconciler
from reconciler.reconcile import Source, make_plan
from reconciler.runspec.normalize import spec_digest
from reconciler.state import InventoryEntry

from .conftest import LONG, TOKEN
from .test_api import tiny

GIT = "https://github.com/acme/runs.git//runs"  # a source whose folder is named "runs"
ENC = quote(GIT, safe="")


def entry(name: str, at: float = 1.0) -> dict:
    return {"spec": tiny(name), "applied_at": at, "file": f"{name}.yaml"}


def served(name: str, at: float = 1.0) -> dict:
    """``entry(name, at)`` as the server answers it: with the digest of its spec."""
    return {**entry(name, at), "digest": spec_digest(tiny(name))}


def locked(client, name: str = "s", lock_id: str = "L1") -> str:
    assert (
        client.post(f"/api/sources/{name}/lock", json={"owner": "me@h:1", "id": lock_id}).status_code == 201
    )
    return lock_id


def test_an_inventory_entry_is_written_and_removed_alone_under_the_lock(client):
    assert client.get("/api/sources/s/runs").status_code == 404
    lock = locked(client)
    r = client.put("/api/sources/s/runs/a", json=entry("a"), headers={"X-Astra-Lock": lock})
    assert r.status_code == 200 and r.json() == {"name": "s", "resource_version": 1}
    assert r.headers["etag"] == '"1-L1"'
    client.put("/api/sources/s/runs/b", json=entry("b", 2.0), params={"lock": lock})  # the query form
    runs = client.get("/api/sources/s/runs").json()
    assert runs == {"name": "s", "resource_version": 2, "items": {"a": served("a"), "b": served("b", 2.0)}}
    assert client.get("/api/sources/s").json()["inventory"] == runs["items"]
    assert (
        client.delete("/api/sources/s/runs/a", headers={"X-Astra-Lock": lock}).json()["resource_version"] == 3
    )
    assert client.delete("/api/sources/s/runs/a", headers={"X-Astra-Lock": lock}).status_code == 404
    assert list(client.get("/api/sources/s/runs").json()["items"]) == ["b"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", "/api/sources/s/runs/a", entry("a")),
        ("DELETE", "/api/sources/s/runs/b", None),
        ("POST", "/api/sources/s/history", {"who": "x", "result": "applied"}),
    ],
)
def test_inventory_and_history_writes_need_the_lock_held_else_409_with_the_holder(client, method, path, body):
    kw = {"json": body} if body is not None else {}
    none = client.request(method, path, headers={"X-Astra-Lock": "L1"}, **kw)
    assert none.status_code == 409 and none.json()["lock"] is None and "not locked" in none.json()["detail"]
    lock = locked(client)
    client.put("/api/sources/s/runs/b", json=entry("b"), headers={"X-Astra-Lock": lock})
    for headers in ({}, {"X-Astra-Lock": "someone-else"}):
        refused = client.request(method, path, headers=headers, **kw)
        assert refused.status_code == 409
        assert refused.json()["lock"]["id"] == "L1" and "locked under L1" in refused.json()["detail"]
    before = client.get("/api/sources/s").json()
    assert before["resource_version"] == 1  # nothing refused was written
    assert client.request(method, path, headers={"X-Astra-Lock": lock}, **kw).status_code in (200, 201)


def test_status_needs_no_lock_but_is_held_to_one_it_names(client):
    r = client.put("/api/sources/s/status", json={"state": "Ready"})
    assert r.status_code == 200 and r.json()["resource_version"] == 1
    locked(client)
    assert client.put("/api/sources/s/status", json={"state": "Reconciling"}).status_code == 200
    wrong = client.put("/api/sources/s/status", json={"state": "x"}, headers={"X-Astra-Lock": "L2"})
    assert wrong.status_code == 409 and wrong.json()["lock"]["id"] == "L1"
    assert client.get("/api/sources/s").json()["status"] == {"state": "Reconciling"}
    assert client.put("/api/sources/s/status", json=["not", "an", "object"]).status_code == 422


def test_history_keeps_the_newest_100(client):
    lock = locked(client)
    for i in range(105):
        r = client.post(
            "/api/sources/s/history", json={"who": "me", "when": float(i)}, headers={"X-Astra-Lock": lock}
        )
        assert r.status_code == 201
    history = client.get("/api/sources/s").json()["history"]
    assert [h["when"] for h in history] == [float(i) for i in range(5, 105)]


def test_a_bad_entry_is_422_and_unknown_methods_405(client):
    lock = locked(client)
    bad = client.put(
        "/api/sources/s/runs/a", json={"spec": [], "applied_at": "now"}, headers={"X-Astra-Lock": lock}
    )
    assert bad.status_code == 422 and [p["path"] for p in bad.json()] == ["spec", "applied_at"]
    assert (
        client.put("/api/sources/s/runs/a", content=b"{", headers={"X-Astra-Lock": lock}).status_code == 422
    )
    assert client.get("/api/sources/s/status").status_code == 405
    assert client.post("/api/sources/s/runs/a", json=entry("a")).status_code == 405


@pytest.mark.parametrize(
    "path",
    ["/api/sources/s/runs", "/api/sources/s/runs/a", "/api/sources/s/status", "/api/sources/s/history"],
)
def test_401_without_a_token_and_403_for_another_workspace(client, path):
    assert client.put(path, json={}, token=None).status_code == 401
    assert client.put(path, json={}, token="wrong").status_code == 401
    other = path.replace("/api", LONG.replace("/workspaces/default", "/workspaces/other"))
    assert client.put(other, json={}).status_code == 403


def test_both_base_paths_serve_the_granular_routes(client):
    lock = locked(client)
    r = client.put(f"{LONG}/sources/s/runs/a", json=entry("a"), headers={"X-Astra-Lock": lock})
    assert r.status_code == 200
    assert client.get("/api/sources/s/runs").json()["items"] == {"a": served("a")}


def test_a_name_sent_encoded_whole_is_never_read_as_a_sub_resource(client):
    """A source whose folder is named ``runs`` ends with ``/runs``: encoded, it is one segment."""
    assert client.post(f"/api/sources/{ENC}/lock", json={"owner": "me", "id": "L"}).status_code == 201
    r = client.put(f"/api/sources/{ENC}/runs/a", json=entry("a"), headers={"X-Astra-Lock": "L"})
    assert r.status_code == 200 and r.json()["name"] == GIT
    whole = client.get(f"/api/sources/{ENC}").json()
    assert whole["name"] == GIT and whole["inventory"] == {"a": served("a")}
    assert client.get(f"/api/sources/{ENC}/runs").json()["items"] == {"a": served("a")}
    assert [s["name"] for s in client.get("/api/sources").json()["items"]] == [GIT]


def test_a_read_names_the_tag_and_an_unchanged_source_is_304(client):
    lock = locked(client)
    client.put("/api/sources/s/runs/a", json=entry("a"), headers={"X-Astra-Lock": lock})
    first = client.get("/api/sources/s")
    tag = first.headers["etag"]
    assert tag == '"1-L1"'
    same = client.get("/api/sources/s", headers={"If-None-Match": tag})
    assert same.status_code == 304 and same.content == b"" and same.headers["etag"] == tag
    client.delete("/api/sources/s/lock", params={"id": lock})  # the lock is part of the tag
    assert client.get("/api/sources/s", headers={"If-None-Match": tag}).status_code == 200


def test_a_whole_put_is_kept_as_rows_and_read_back_alike(client, plane):
    state = {
        "inventory": {"a": entry("a"), "b": entry("b")},
        "status": {"state": "Ready"},
        "history": [{"x": 1}],
    }
    assert client.put("/api/sources/s", json={"resource_version": 0, **state}).status_code == 200
    with plane.store.engine.connect() as conn:
        rows = (
            conn.execute(text("SELECT run FROM source_runs WHERE source = 's' ORDER BY run")).scalars().all()
        )
    assert rows == ["a", "b"]
    got = client.get("/api/sources/s").json()
    assert {k: got[k] for k in state} == {**state, "inventory": {"a": served("a"), "b": served("b")}}


def test_a_schema_2_database_has_its_sources_split_into_rows_when_opened(tmp_path):
    url = f"sqlite:///{tmp_path / 'astra.db'}"
    store = Store(url)
    old = {
        "inventory": {"a": entry("a"), "b": entry("b", 2.0)},
        "status": {"state": "Ready"},
        "history": [{"who": "me", "when": 1.0}],
        "note": "kept",
    }
    with store.engine.begin() as conn:  # as schema 2 left it: the whole state in one JSON column
        conn.execute(text("DROP TABLE source_runs"))
        conn.execute(text("ALTER TABLE sources DROP COLUMN status"))
        conn.execute(text("ALTER TABLE sources DROP COLUMN history"))
        conn.execute(update(SchemaVersion.__table__).values(version=2))
        conn.execute(
            text(
                "INSERT INTO sources (name, data, resource_version, lock, updated_at) "
                "VALUES ('s', :data, 7, :lock, 1.0), ('odd', :odd, 1, NULL, 1.0)"
            ),
            {
                "data": json.dumps(old),
                "lock": json.dumps({"id": "L", "owner": "me", "created_at": 1.0}),
                "odd": json.dumps({"inventory": ["a"]}),
            },
        )
    store.close()
    again = Store(url)
    assert again.schema_version() == SCHEMA_VERSION == 4
    got = again.get_source("s")
    assert got == {
        **old,
        "inventory": {"a": served("a"), "b": served("b", 2.0)},
        "name": "s",
        "resource_version": 7,
        "lock": {"id": "L", "owner": "me", "created_at": 1.0},
    }
    with again.engine.connect() as conn:
        assert conn.execute(text("SELECT data FROM sources WHERE name = 's'")).scalar() == '{"note":"kept"}'
        assert conn.execute(text("SELECT count(*) FROM source_runs WHERE source = 's'")).scalar() == 2
    assert again.get_source("odd")["legacy_inventory"] == ["a"]  # another shape is kept, aside
    assert again.put_source_run("s", "c", entry("c"), "L", 2.0) == 8
    again.close()
    assert sorted(Store(url).get_source("s")["inventory"]) == [
        "a",
        "b",
        "c",
    ]  # opened again: no second migration


# ---- astra's client against this app: how many calls an apply and a watch pass make -------------


class CountingAsgi(httpx.BaseTransport):
    """A synchronous transport into the ASGI app (``HttpCluster`` is sync), keeping every request."""

    def __init__(self, app):
        self.inner = httpx.ASGITransport(app=app)
        self.seen: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)

        async def go() -> httpx.Response:
            response = await self.inner.handle_async_request(request)
            return httpx.Response(
                response.status_code, headers=response.headers, content=await response.aread()
            )

        return asyncio.run(go())

    def sources(self) -> list[httpx.Request]:
        return [r for r in self.seen if "/sources" in r.url.path]

    def clear(self) -> None:
        self.seen.clear()


@pytest.fixture
def wire(client, tmp_path, monkeypatch):
    stamina.set_testing(True, attempts=1)
    monkeypatch.chdir(tmp_path)
    transport = CountingAsgi(client.app)
    cluster = HttpCluster("http://astra.test", TOKEN, transport=transport)
    yield cluster, transport
    cluster.close()
    stamina.set_testing(False)


def write_runs(folder: Path, n: int) -> None:
    folder.mkdir(exist_ok=True)
    for i in range(n):
        (folder / f"r{i:03d}.json").write_text(json.dumps(tiny(f"r{i:03d}")))


def test_an_apply_of_n_runs_makes_a_few_small_source_calls_and_no_whole_put(wire, tmp_path):
    cluster, transport = wire
    n = 50
    write_runs(tmp_path / "runs", n)
    store = cluster.source_store()
    source = Source(GIT, ("runs",))
    plan = make_plan(source, load_source(["runs"]), cluster, store, 1.0)
    transport.clear()
    result = apply_plan(plan, cluster, store, now=lambda: 2.0, who="me@h:1")
    assert result.ok and result.counts == {"created": n}
    calls = [(r.method, r.url.raw_path.decode().split(ENC, 1)[1].split("?")[0]) for r in transport.sources()]
    # never the whole state: the runs are created and recorded by one batch (POST /runs:batch)
    assert calls == [("POST", "/lock"), ("GET", ""), ("POST", "/history"), ("DELETE", "/lock")]
    batches = [r for r in transport.seen if r.url.path.endswith("/runs:batch")]
    assert len(batches) == 1 and not [r for r in transport.seen if r.url.path.endswith("/api/runs")]
    assert max(len(r.content) for r in transport.sources()) < 2_000  # each write one small entry
    state = store.read(GIT)
    assert len(state.inventory) == n and state.lock is None and len(state.history) == 1
    assert state.inventory["r007"].file == "runs/r007.json"


def test_astra_apply_of_n_runs_reads_nothing_of_the_source_it_does_not_compare(wire, tmp_path, monkeypatch):
    """``astra apply -f`` (``apply_source``) takes the lock, plans, and applies: of the source's
    state it reads the inventory's digests for the plan, and nothing more while it applies."""
    from reconciler.apply import apply_source

    cluster, transport = wire
    write_runs(tmp_path / "runs", 50)
    monkeypatch.chdir(tmp_path)
    store = cluster.source_store()
    done = apply_source(Source(GIT, ("runs",)), cluster, store, now=lambda: 2.0, who="me@h:1")
    assert done.ok and done.result.counts == {"created": 50}
    calls = [(r.method, r.url.raw_path.decode().split(ENC, 1)[1].split("?")[0]) for r in transport.sources()]
    assert calls == [
        ("POST", "/lock"),
        ("GET", "/runs"),  # the plan's: the inventory's digests
        ("POST", "/history"),
        ("PUT", "/status"),
        ("DELETE", "/lock"),
    ]
    assert transport.sources()[1].url.params["view"] == "digest"
    write_runs(tmp_path / "runs", 51)  # one more run: the 50 others are left as they are
    transport.clear()
    again = apply_source(Source(GIT, ("runs",)), cluster, store, now=lambda: 3.0, who="me@h:1")
    assert again.ok and again.result.counts == {"created": 1, "unchanged": 50}
    assert [r.method for r in transport.sources()].count("GET") == 1  # the plan's read only


def watched(cluster: HttpCluster, tmp_path: Path, n: int) -> tuple[ApiSourceStore, Reconciler]:
    """A source of ``n`` runs, and a watch's reconciler of it after its first pass (Ready)."""
    write_runs(tmp_path / "runs", n)
    store = cluster.source_store()
    reconciler = Reconciler(
        Source(GIT, ("runs",)), cluster, store, clock=lambda: 5.0, who="loop@h:1", rng=random.Random(1)
    )
    assert reconciler.reconcile_once()["state"] == "Ready"
    return store, reconciler


def test_a_watch_pass_for_one_changed_file_moves_no_whole_state(wire, tmp_path):
    cluster, transport = wire
    store, reconciler = watched(cluster, tmp_path, 60)
    changed = tmp_path / "runs" / "r007.json"
    changed.write_text(json.dumps(tiny("r007", command="false")))
    transport.clear()
    status = reconciler.reconcile_once({str(changed)})
    assert status["state"] == "Ready" and [c.address for c in reconciler.last_plan.changes] == ["r007"]
    source_calls = transport.sources()
    assert len(source_calls) <= 10
    reads = [r for r in source_calls if r.method == "GET"]
    # no read: the state this store keeps was confirmed by the answer to the pass's first status
    # write (nobody else wrote since the last pass), and by the lock's under the lock
    assert reads == []
    assert all(len(r.content) < 2_000 for r in source_calls)
    assert not any(r.method == "PUT" and r.url.raw_path.decode().endswith(ENC) for r in source_calls)
    assert store.read(GIT).inventory["r007"].spec["spec"]["task_template"]["args"] == ["-c", "false"]


def test_a_watch_pass_reads_the_source_whole_when_another_writer_came_in_between(wire, tmp_path):
    cluster, transport = wire
    store, reconciler = watched(cluster, tmp_path, 3)
    other = HttpCluster("http://astra.test", TOKEN, transport=transport).source_store()
    lock = other.lock(GIT, "ci@h:2", 6.0)
    other.record(GIT, "elsewhere", InventoryEntry({"metadata": {"name": "elsewhere"}}, 6.0, "other.yaml"))
    other.unlock(GIT, lock.id)
    changed = tmp_path / "runs" / "r001.json"
    changed.write_text(json.dumps(tiny("r001", command="false")))
    transport.clear()
    assert reconciler.reconcile_once({str(changed)})["state"] == "Ready"
    reads = [r for r in transport.sources() if r.method == "GET"]
    assert len(reads) == 1  # the status write's answer said another wrote: the source read again
    kept = store.kept(GIT)  # what the pass planned with: the other writer's entry too
    assert kept is not None and "elsewhere" in kept.inventory
