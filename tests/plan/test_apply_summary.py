"""The apply summary counts every run the apply handled (issue 12): after a resumed apply, the runs
it only recorded in the inventory are counted too, and the totals add up to the runs."""

from __future__ import annotations

import re

import pytest

from reconciler.clusters.fake import SimulatedCrash
from reconciler.plan import render_apply

from .conftest import apply_text


def totals(text: str) -> dict[str, int]:
    """The summary line's counts, by outcome."""
    (line,) = [line for line in text.splitlines() if line.startswith("Apply ")]
    return {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", line)}


def test_a_resumed_apply_counts_the_runs_it_only_recorded(world, monkeypatch):
    for i in range(30):
        world.run(f"r{i:02d}")
    store, real = world.store, world.store.record

    def killed_before_recording_r12(name, run, entry):
        if run == "r12":
            raise SimulatedCrash("killed between creating r12 and recording it")
        real(name, run, entry)

    monkeypatch.setattr(store, "record", killed_before_recording_r12)
    with pytest.raises(SimulatedCrash):
        world.apply()
    monkeypatch.setattr(store, "record", real)
    assert len(world.cluster.names()) == 13 and len(store.read("test").inventory) == 12

    result = world.converge()
    text = apply_text(result)
    assert "r12: recorded in the inventory" in text.splitlines()
    assert text.splitlines()[-1] == (
        "Apply complete: 17 created, 0 configured, 0 replaced, 0 deleted, 1 recorded, 12 unchanged."
    )
    assert sum(totals(text).values()) == 30 == len(result.entries)


def test_every_outcome_is_counted_and_the_usual_line_is_as_it_was():
    entries = [
        {"address": "a", "action": "create", "outcome": "created", "message": ""},
        {"address": "b", "action": "create", "outcome": "failed", "message": "refused"},
        {"address": "c", "action": "forget", "outcome": "forgotten", "message": ""},
        {"address": "d", "action": "noop", "outcome": "unchanged", "message": ""},
    ]
    counts = {"created": 1, "failed": 1, "forgotten": 1, "unchanged": 1}
    failed = render_apply({"entries": entries, "counts": counts, "result": "failed", "error": "b: refused"})
    assert (
        "Apply FAILED: 1 created, 0 configured, 0 replaced, 0 deleted, 1 forgotten, 1 failed, 1 unchanged."
        in (failed.splitlines())
    )
    usual = render_apply({"entries": entries[:1], "counts": {"created": 1}, "result": "applied"})
    assert (
        usual.splitlines()[-1]
        == "Apply complete: 1 created, 0 configured, 0 replaced, 0 deleted, 0 unchanged."
    )
