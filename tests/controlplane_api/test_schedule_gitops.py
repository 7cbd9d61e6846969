"""GitOps and a run on a schedule: the file is the run on a schedule; the runs it makes are not
the source's, so a plan never diffs them and a prune never deletes them (ownership is the
source's inventory: ``reconciler.owners``); on the simulated clock, through the API."""

from __future__ import annotations

import json

import pytest
import stamina

from reconciler.apply import apply_plan
from reconciler.clusters.http import HttpCluster
from reconciler.load import load_source
from reconciler.plan import Action
from reconciler.reconcile import Source, make_plan

from .simulated import TOKEN
from .test_api import tiny
from .test_schedule_engine import made, run_for, served
from .test_sources import CountingAsgi

SOURCE = "nightlies"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    stamina.set_testing(True, attempts=1)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    doc = tiny("nightly", schedule={"cron": "* * * * *", "keep": 5})
    (tmp_path / "runs" / "nightly.json").write_text(json.dumps(doc))
    (tmp_path / "runs" / "plain.json").write_text(json.dumps(tiny("plain")))
    yield tmp_path
    stamina.set_testing(False)


def test_a_prune_never_deletes_or_diffs_the_runs_a_schedule_made(tmp_path, folder):
    s = served(tmp_path / "server")
    cluster = HttpCluster("http://astra.test", TOKEN, transport=CountingAsgi(s.app))
    store = cluster.source_store()

    def plan():
        return make_plan(Source(SOURCE, ("runs",), prune=True), load_source(["runs"]), cluster, store, 1.0)

    first = plan()
    assert sorted(c.address for c in first.changes if c.action is Action.create) == ["nightly", "plain"]
    assert apply_plan(first, cluster, store, now=lambda: 2.0, who="me@h:1").ok
    run_for(s, 120)
    assert sorted(made(s)) == ["nightly-20261202-0200", "nightly-20261202-0201", "plain"]
    made_run = s.call("GET", "/api/runs/nightly-20261202-0200").json()
    assert "astra.source" not in (made_run["metadata"].get("annotations") or {})

    again = plan()
    assert not again.has_changes, [(c.address, c.action) for c in again.changes]
    assert again.not_pruned == ()
    assert sorted(store.read(SOURCE).inventory) == ["nightly", "plain"]

    (folder / "runs" / "plain.json").unlink()  # a run of the source's gone from the files
    pruned = plan()
    assert [(c.address, c.action) for c in pruned.changes if c.action is not Action.noop] == [
        ("plain", Action.delete)
    ]
