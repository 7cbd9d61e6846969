"""Runs that wait for runs on Slurm (``spec.depends_on``): Slurm's ``--dependency``, and the words.

Owns: the ``--dependency`` of a run's first submission (``dependency_option``: ``afterok`` for
``when: Completed``, ``afternotok`` for ``Failed``, ``afterany`` for ``Finished``, on every job
astra holds for the other run: ``job_ids``), and what the run waits with, judged from the other
runs as astra observes them (``blocked``, the control plane's words: ``Waiting for run
preprocess (Running)``; ``Run preprocess ended Failed; this run needs it Completed`` once it can
no longer be met), and the order a batch of creates is submitted in (``waves``: a run after the
runs of the batch it depends on, so their job ids are known when it is submitted).

Slurm judges jobs, astra judges runs: a dependency's job that fails while astra will restart it
makes Slurm's dependency ``DependencyNeverSatisfied`` (astra submits with
``--kill-on-invalid-dep=no``, so Slurm keeps the job; the cluster points its dependency at the
restarted job, ``scontrol update Dependency=``), and the run fails only once the other run has
ended otherwise than asked (astra cancels its jobs, with the words). A run named that has no
record yet (its create failed, or comes later) is waited for: the job is submitted held
(``--hold``) and released once the other run exists (docs/slurm.md).

Must not touch: processes, files, clocks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.runspec.lifecycle import WHEN_MET, dependency_unmet, waiting_for_run
from reconciler.runspec.models import Run

from ...runs import LiveRun
from .records import units

__all__ = ["SLURM_AFTER", "Blocked", "blocked", "dependency_option", "job_ids", "waves"]

#: ``depends_on[].when`` as Slurm's dependency type.
SLURM_AFTER = {"Completed": "afterok", "Failed": "afternotok", "Finished": "afterany"}
#: (the words, whether the wait can never end)
Blocked = tuple[str, bool]


def job_ids(record: dict[str, Any]) -> list[str]:
    """The jobs astra holds for a run now: each unit's current job, an array's job id where
    every copy it covers is still its current attempt, else ``JOB_INDEX`` for each copy left."""
    current = units(record)
    covering: dict[int, list[int]] = {}
    for index, attempt in current.items():
        covering.setdefault(id(attempt), []).append(index)
    out: list[str] = []
    for attempt in record["attempts"]:
        indices = covering.pop(id(attempt), None)
        if indices is None:
            continue
        covers = attempt["indices"] if attempt["indices"] is not None else range(record["size"])
        whole = len(indices) == len(covers)
        if record["kind"] != "array" or whole:
            out.append(str(attempt["job_id"]))
        else:
            out += [f"{attempt['job_id']}_{i}" for i in sorted(indices)]
    return out


def dependency_option(run: Run, records: Mapping[str, dict[str, Any] | None]) -> tuple[str | None, list[str]]:
    """``--dependency=afterok:1:2,afterany:7`` for the runs of ``run.spec.depends_on`` that have a
    record (``records``, by name; ``None``: none yet), and the names of those that have none."""
    parts, missing = [], []
    for d in run.spec.depends_on or ():
        record = records.get(d.run)
        ids = job_ids(record) if record is not None else []
        if not ids:
            missing.append(d.run)
            continue
        parts.append(f"{SLURM_AFTER[d.when]}:{':'.join(ids)}")
    return ("--dependency=" + ",".join(parts) if parts else None), missing


def blocked(run: Run, others: Mapping[str, LiveRun | None]) -> Blocked | None:
    """Why ``run`` may not start for the runs it depends on (``others``: each as observed, ``None``
    for none), in the control plane's words; ``None`` when each has ended as asked."""
    for d in run.spec.depends_on or ():
        other = others.get(d.run)
        if other is None:
            return waiting_for_run(d.run, None), False
        if not other.final:
            return waiting_for_run(d.run, other.state), False
        if other.state not in WHEN_MET[d.when]:
            return dependency_unmet(d.run, other.state, d.when), True
    return None


def waves(runs: Sequence[Run]) -> list[list[int]]:
    """The positions of ``runs`` in the order to submit them: each wave after the waves holding
    the runs of ``runs`` it depends on (a cycle, which validate refuses, is cut where met)."""
    names = {r.metadata.name: i for i, r in enumerate(runs)}
    level: dict[int, int] = {}

    def depth(i: int, seen: frozenset[int]) -> int:
        if i in level:
            return level[i]
        inner = [names[d.run] for d in runs[i].spec.depends_on or () if d.run in names]
        level[i] = 1 + max((depth(j, seen | {i}) for j in inner if j not in seen | {i}), default=-1)
        return level[i]

    for i in range(len(runs)):
        depth(i, frozenset())
    out: list[list[int]] = [[] for _ in range(max(level.values(), default=-1) + 1)]
    for i in range(len(runs)):
        out[level[i]].append(i)
    return out
