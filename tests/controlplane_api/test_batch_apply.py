"""An apply through ``POST /runs:batch``: idempotent, and resumable after a kill, with nothing lost."""

from __future__ import annotations

import json

import httpx
import pytest
import stamina

from reconciler import apply as applying
from reconciler.apply import apply_plan
from reconciler.clusters.batch import create_batch
from reconciler.clusters.http import HttpCluster
from reconciler.load import load_source
from reconciler.plan import Action
from reconciler.reconcile import Source, make_plan

from .conftest import TOKEN
from .test_api import tiny
from .test_sources import CountingAsgi

SOURCE = "batched"


class Killed(BaseException):
    """The apply's process, killed: nothing it does after runs (no history, no unlock)."""


class DiesAfter(CountingAsgi):
    """Forwards every request until the ``n``-th batch has reached the server, then none."""

    def __init__(self, app, n: int):
        super().__init__(app)
        self.left = n

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.left <= 0:
            raise Killed("the apply was killed")
        response = super().handle_request(request)
        if request.url.path.endswith("/runs:batch"):
            self.left -= 1
            if self.left == 0:
                raise Killed("killed before reading the batch's answer")
        return response


@pytest.fixture
def folder(tmp_path, monkeypatch):
    stamina.set_testing(True, attempts=1)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(applying, "BATCH_RUNS", 10)
    (tmp_path / "runs").mkdir()
    for i in range(35):
        (tmp_path / "runs" / f"r{i:03d}.json").write_text(json.dumps(tiny(f"r{i:03d}")))
    yield tmp_path
    stamina.set_testing(False)


def plan_of(cluster):
    store = cluster.source_store()
    return store, make_plan(Source(SOURCE, ("runs",)), load_source(["runs"]), cluster, store, 1.0)


def test_an_apply_killed_mid_batch_resumes_with_no_run_lost_or_made_twice(client, folder):
    dying = HttpCluster("http://astra.test", TOKEN, transport=DiesAfter(client.app, 3))
    store, plan = plan_of(dying)
    with pytest.raises(Killed):
        apply_plan(plan, dying, store, now=lambda: 2.0, who="me@h:1")
    # three batches of 10 reached the server, each one write: 30 runs, each recorded
    live = HttpCluster("http://astra.test", TOKEN, transport=CountingAsgi(client.app))
    store, _ = plan_of(live)
    held = store.read(SOURCE)
    assert len(held.inventory) == 30 and len(client.plane.engine.state.runs) == 30
    assert held.lock is not None  # a killed apply leaves its lock: astra force-unlock
    store.unlock(SOURCE, held.lock.id)
    store, plan = plan_of(live)
    creates = sorted(c.address for c in plan.changes if c.action is Action.create)
    assert creates == [f"r{i:03d}" for i in range(30, 35)]
    result = apply_plan(plan, live, store, now=lambda: 3.0, who="me@h:1")
    assert result.ok and result.counts == {"created": 5, "unchanged": 30}
    assert sorted(client.plane.engine.state.runs) == [f"r{i:03d}" for i in range(35)]
    store, again = plan_of(live)
    assert not again.has_changes
    assert len(store.read(SOURCE).inventory) == 35


def test_a_batch_create_of_a_run_already_there_counts_as_done_in_order(client, folder):
    cluster = HttpCluster("http://astra.test", TOKEN, transport=CountingAsgi(client.app))
    store, plan = plan_of(cluster)
    real = store.create_runs

    def meanwhile(*args):
        if "r004" not in client.plane.engine.state.runs:  # someone (a killed apply) created it
            client.post("/api/runs", json=tiny("r004"))
        return real(*args)

    store.create_runs = meanwhile
    seen = []
    result = apply_plan(plan, cluster, store, now=lambda: 2.0, who="me@h:1", on_entry=seen.append)
    assert result.ok and result.counts == {"created": 35}
    assert [e.address for e in seen] == [f"r{i:03d}" for i in range(35)]  # in order, as run by run
    assert seen[4].message == "already there with this spec: counted as done"
    assert len(store.read(SOURCE).inventory) == 35


def test_a_batch_sends_each_document_as_it_is_whatever_its_text_and_numbers(client):
    cluster = HttpCluster("http://astra.test", TOKEN, transport=CountingAsgi(client.app))
    docs = [tiny("words", command="echo équipe ✓"), tiny("nulled", command="echo null"), tiny("big")]
    docs[0]["metadata"]["labels"] = {"team": "équipe"}
    docs[2]["spec"]["priority"] = 2**70  # past orjson's 64 bits: sent all the same, refused in words
    done = create_batch(cluster, docs)
    assert done is not None and done.statuses == [201, 201, 422]
    for doc in docs[:2]:
        held = client.get(f"/api/runs/{doc['metadata']['name']}").json()
        assert held["spec"] == doc["spec"] and held["metadata"].get("labels") == doc["metadata"].get("labels")
    r = client.post("/api/runs", json=docs[2])
    assert r.status_code == 422 and "priority" in r.text


def test_new_runs_whose_names_fall_among_the_applied_ones_go_in_full_batches(client, folder):
    for i in range(35, 70):  # r000 … r069: every other name is new, as runs added to a repo
        (folder / "runs" / f"r{i:03d}.json").unlink(missing_ok=True)
    for i in range(0, 70, 2):
        (folder / "runs" / f"r{i:03d}.json").unlink(missing_ok=True)
    transport = CountingAsgi(client.app)
    cluster = HttpCluster("http://astra.test", TOKEN, transport=transport)
    store, plan = plan_of(cluster)
    assert apply_plan(plan, cluster, store, now=lambda: 2.0, who="me@h:1").ok  # r001, r003, … r033
    for i in range(0, 70, 2):
        (folder / "runs" / f"r{i:03d}.json").write_text(json.dumps(tiny(f"r{i:03d}")))
    store, plan = plan_of(cluster)
    transport.clear()
    result = apply_plan(plan, cluster, store, now=lambda: 3.0, who="me@h:1")
    assert result.ok and result.counts == {"created": 35, "unchanged": 17}
    batches = [r for r in transport.seen if r.url.path.endswith("/runs:batch")]
    assert [len(json.loads(r.content)["runs"]) for r in batches] == [10, 10, 10, 5]
    assert not [r for r in transport.seen if r.method == "POST" and r.url.path.endswith("/runs")]
    assert sorted(client.plane.engine.state.runs) == sorted(
        [f"r{i:03d}" for i in range(1, 35, 2)] + [f"r{i:03d}" for i in range(0, 70, 2)]
    )
