"""No phantom diffs: every example, applied to the fake cluster (which fills server defaults in,
as a control plane does), then planned again, plans no change."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.apply import apply_plan
from reconciler.clusters.fake import FakeCluster
from reconciler.load import load_source
from reconciler.reconcile import Source, make_plan

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(  # the files astra finds: not under hidden names (examples/ci/.gitlab-ci.yml)
    p.relative_to(ROOT)
    for p in (ROOT / "examples").rglob("*")
    if p.suffix in (".yaml", ".json") and not any(s.startswith(".") for s in p.relative_to(ROOT).parts)
)


def test_there_are_examples():
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("example", EXAMPLES, ids=str)
def test_applied_example_plans_no_changes(example, monkeypatch):
    monkeypatch.chdir(ROOT)
    cluster = FakeCluster()
    store = cluster.source_store()
    source = Source("examples", (str(example),))
    loaded = load_source(source.paths)
    assert loaded.ok, [e.format() for e in loaded.errors]
    first = make_plan(source, loaded, cluster, store, 0.0)
    assert first.has_changes
    assert apply_plan(first, cluster, store, now=lambda: 0.0, who="t").ok
    again = make_plan(source, load_source(source.paths), cluster, store, 0.0)
    assert not again.has_changes, [(c.address, c.fields) for c in again.changes]
    # and the stored documents differ from the files' (server defaults), so this proves something
    stored = cluster.document(next(iter(loaded.runs)))
    assert "on_failure" in stored["spec"] and "uid" in stored["metadata"]
