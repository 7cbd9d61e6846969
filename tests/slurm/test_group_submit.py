"""How the slurm cluster submits a run's group jobs: the dependency chain (sbatch faked, no Slurm)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from reconciler.clusters.slurm import SlurmCluster
from reconciler.runspec.parse import parse_run


def tmpl(**kw: Any) -> dict[str, Any]:
    return {"image": "i", "command": "true", **kw}


CHAIN = {
    "metadata": {"name": "pt"},
    "spec": {
        "task_groups": [
            {"name": "trainer", "replicas": 2, "start_after": "ps", "task_template": tmpl()},
            {"name": "ps", "task_template": tmpl()},
            {"name": "eval", "start_after": "trainer", "task_template": tmpl()},
        ]
    },
}


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cluster = SlurmCluster("debug", state_dir=tmp_path, images="host")
    calls: list[tuple[str, list[str]]] = []
    ids = itertools.count(101)

    def sbatch(script: str, extra: list[str]) -> int:
        calls.append((script, extra))
        return next(ids)

    monkeypatch.setattr(cluster, "_sbatch", sbatch)
    monkeypatch.setattr(cluster, "node_count", lambda: 2)
    return cluster, calls


def test_create_submits_in_start_after_order_with_after_dependencies(fake):
    cluster, calls = fake
    run = parse_run(CHAIN)
    record = cluster._group_record(run, CHAIN, cluster._submission(run, "n1"), 0.0)
    cluster._submit_groups(record, run, None, restart=0, why="", not_before=None, now=0.0)
    assert ["group ps," in s for s, _ in calls] == [True, False, False]
    assert [extra for _, extra in calls] == [
        [],
        ["--dependency=after:101", "--kill-on-invalid-dep=yes"],  # trainer after ps
        ["--dependency=after:102", "--kill-on-invalid-dep=yes"],  # eval after trainer
    ]
    assert [(a["job_id"], a["indices"]) for a in record["attempts"]] == [(101, [1]), (102, [0]), (103, [2])]
    assert [g["offset"] for g in record["groups"]] == [0, 2, 3]
    # every job of one generation reads the same leader file; the leader's group (spec order: trainer)
    # writes it even though it starts second
    gen = record["generation"]
    assert all(f"leader.{gen}" in s for s, _ in calls)
    assert "mv -f" in calls[1][0] and "mv -f" not in calls[0][0]


def test_restart_job_is_a_new_generation_with_begin_on_the_first(fake):
    cluster, calls = fake
    run = parse_run(CHAIN)
    record = cluster._group_record(run, CHAIN, cluster._submission(run, "n1"), 0.0)
    cluster._submit_groups(record, run, None, restart=0, why="", not_before=None, now=0.0)
    first_gen = record["generation"]
    calls.clear()
    cluster._submit_groups(record, run, None, restart=1, why="w", not_before=1e10, now=0.0)
    assert record["generation"] != first_gen
    assert calls[0][1][0].startswith("--begin=")
    assert calls[1][1] == [
        "--dependency=after:104",
        "--kill-on-invalid-dep=yes",
        "--export=ALL,ASTRA_ATTEMPT=1,ASTRA_RESTART_REASON=Failed",  # ASTRAEUS_ATTEMPT, and why
    ]
    assert {a["restart"] for a in record["attempts"][3:]} == {1}


def test_restart_task_waits_only_for_a_predecessor_not_started(fake):
    cluster, calls = fake
    run = parse_run(CHAIN)
    record = cluster._group_record(run, CHAIN, cluster._submission(run, "n1"), 0.0)
    cluster._submit_groups(record, run, None, restart=0, why="", not_before=None, now=0.0)
    gen = record["generation"]
    calls.clear()
    # eval (2) restarts; trainer (0) runs: no dependency, only the backoff
    cluster._submit_groups(
        record, run, None, restart=1, why="w", not_before=1e10, now=0.0, only={2}, pending=set()
    )
    assert len(calls) == 1 and calls[0][1][0].startswith("--begin=")
    # eval restarts while trainer's job is still pending: after trainer's current job
    calls.clear()
    cluster._submit_groups(
        record, run, None, restart=2, why="w", not_before=None, now=0.0, only={2}, pending={0}
    )
    assert calls[0][1] == [
        "--dependency=after:102",
        "--kill-on-invalid-dep=yes",
        "--export=ALL,ASTRA_ATTEMPT=2,ASTRA_RESTART_REASON=Failed",  # its third submission
    ]
    assert record["generation"] == gen  # the leader's file is still the one to read
