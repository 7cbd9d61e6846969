"""``GET /runs?view=summary`` (CONTRACT §5), and astra's plan by digests against this app: the same
plan as by comparing every document, fetching only the runs that differ."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.load import FileCache, load_source
from reconciler.plan import plan_to_json
from reconciler.reconcile import Source, make_plan
from reconciler.runspec.normalize import spec_digest

from .conftest import LONG
from .test_api import tiny
from .test_sources import wire  # noqa: F401  (the fixture)

FIELDS = {"name", "resource_version", "state", "spec_digest"}


@pytest.mark.parametrize("prefix", ["/api", LONG])
def test_summary_view_on_both_base_paths(client, prefix):
    doc = tiny("a")
    doc["spec"]["task_template"]["requested_resources"]["memory_bytes"] = "1Gi"
    assert client.post(f"{prefix}/runs", json=doc).status_code == 201
    client.post(f"{prefix}/runs", json=tiny("b"))
    r = client.get(f"{prefix}/runs", params={"view": "summary"})
    assert r.status_code == 200
    items = r.json()["items"]
    assert [i["name"] for i in items] == ["a", "b"]  # in submission order
    assert all(set(i) == FIELDS for i in items)
    full = {x["metadata"]["name"]: x for x in client.get(f"{prefix}/runs").json()["items"]}
    for i in items:
        run = full[i["name"]]
        assert i["resource_version"] == run["metadata"]["resource_version"]
        assert i["state"] == run["status"]["state"]
        # the digest of the normalised stored document: what the client computes from the full run
        assert i["spec_digest"] == spec_digest(run) == spec_digest({**run, "status": None})
    # one meaning, one digest: 1Gi is 1073741824
    same = tiny("a")
    same["spec"]["task_template"]["requested_resources"]["memory_bytes"] = 1073741824
    assert items[0]["spec_digest"] == spec_digest(same)
    assert client.get(f"{prefix}/runs", params={"view": "full"}).json() == client.get(f"{prefix}/runs").json()


def test_summary_digest_follows_the_document(client):
    client.post("/api/runs", json=tiny("a"))
    (before,) = client.get("/api/runs?view=summary").json()["items"]
    changed = tiny("a", priority=5)  # a change the run takes in place
    changed["metadata"]["resource_version"] = before["resource_version"]
    assert client.put("/api/runs/a", json=changed).status_code == 200
    (after,) = client.get("/api/runs?view=summary").json()["items"]
    assert after["resource_version"] > before["resource_version"]
    assert after["spec_digest"] == spec_digest(changed) != before["spec_digest"]
    client.delete("/api/runs/a")
    assert client.get("/api/runs?view=summary").json() == {"items": []}


@pytest.mark.parametrize("path", ["/api/runs?view=summary", f"{LONG}/runs?view=summary"])
def test_summary_needs_the_token(client, path):
    assert client.get(path, token=None).status_code == 401
    assert client.get(path, token="other").status_code == 401
    if path.startswith(LONG):
        assert client.get(path.replace("/clusters/default/", "/clusters/other/")).status_code == 403


def test_an_unknown_view_is_422(client):
    assert client.get("/api/runs?view=everything").status_code == 422


# ---- astra against this app -------------------------------------------------------------------


def write(folder: Path, name: str, **kw) -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(tiny(name, **kw)))


def both(cluster, store, source, cache, transport=None):
    loaded = load_source(source.paths, cache=cache)
    slow = make_plan(source, loaded, cluster, store, 1.0, fast=False)
    if transport is not None:
        transport.clear()  # what follows: the fast path's calls
    fast = make_plan(source, loaded, cluster, store, 1.0, fast=True)
    assert json.dumps(plan_to_json(fast), sort_keys=True) == json.dumps(plan_to_json(slow), sort_keys=True)
    return fast


def test_plans_by_digest_are_plans_by_comparison(wire, tmp_path, client):  # noqa: F811
    from reconciler.apply import apply_plan

    cluster, transport = wire
    runs = tmp_path / "runs"
    for i in range(6):
        write(runs, f"r{i}")
    store = cluster.source_store()
    cache = FileCache(tmp_path / "cache")
    # r2 is made again out of band and may be running when planned: --replace r2, never held (plan.held)
    source = Source("src", ("runs",), prune=True, replace=("r2",))

    def step():
        plan = both(cluster, store, source, cache)
        assert apply_plan(plan, cluster, store, now=lambda: 2.0, who="me@h:1").ok
        return plan

    assert {c.action.value for c in step().changes} == {"create"}
    noop = both(cluster, store, source, cache, transport)
    assert not noop.has_changes
    fast_calls = [r for r in transport.seen if "/sources" not in r.url.path]
    paths = [(r.url.path, r.url.params.get("view")) for r in fast_calls]
    assert paths == [("/api/runs", "summary")]  # no document fetched, no workers

    write(runs, "r1", command="false")  # a change in the files: replace
    drift = tiny("r2", command="exit 3")  # drift: made again out of band, with other args
    client.delete("/api/runs/r2")
    assert client.post("/api/runs", json=drift).status_code == 201
    label = tiny("r5")  # a field the files do not set, set out of band: other digests, still a noop
    label["metadata"].update(labels={"team": "x"}, resource_version=cluster.get_run("r5").resource_version)
    assert client.put("/api/runs/r5", json=label).status_code == 200
    (runs / "r3.json").unlink()  # prune
    client.delete("/api/runs/r4")  # deleted out of band: planned back
    plan = step()
    assert {c.address: c.action.value for c in plan.changes if c.action.value != "noop"} == {
        "r1": "replace",
        "r2": "replace",
        "r3": "delete",
        "r4": "create",
    }
    assert not both(cluster, store, source, cache).has_changes
