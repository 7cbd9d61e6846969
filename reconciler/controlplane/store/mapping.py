"""Rows <-> the scheduler's records: what a run row, a worker row and a tick's writes hold.

Owns the mapping between the scheduler's ``RunRecord``/``WorkerRecord``/``Ask`` and the store's
rows. Which fields a row takes from its record is read from the record's own dataclass fields
(``RUN_FIELDS``, ``WORKER_FIELDS``: every field but those that name the record and place it),
so a field is declared once, in the scheduler; a test holds that each has its column.

Must not touch: connections and transactions (``facade`` runs the statements), the scheduler's
decisions.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from reconciler.runspec.models import Run

from ...runspec.vocabulary import FINAL_RUN_STATES
from ..inventory import Machine
from ..scheduler import Ask, RunRecord, RunState, WorkerRecord, WorkerState
from .usage import HoldChanges

__all__ = [
    "RUN_FIELDS",
    "WORKER_FIELDS",
    "TickRows",
    "TickWrite",
    "ask_json",
    "ask_of",
    "machine_json",
    "run_record",
    "run_values",
    "tick_rows",
    "worker_record",
    "worker_values",
]

#: A run record's fields that its row holds in columns of their own: ``name``, ``seq`` and
#: ``submitted_at`` (``created_at``) are written once, ``run`` is the row's document.
RUN_FIELDS = tuple(f.name for f in fields(RunRecord) if f.name not in ("name", "run", "seq", "submitted_at"))
#: The fields that place a worker in its run: written once, when the worker is made.
_WORKER_PLACE = ("name", "run", "rank", "world_size", "ask", "group", "group_rank")
#: A worker record's fields that change as the scheduler works: written by every tick that moves it.
WORKER_FIELDS = tuple(f.name for f in fields(WorkerRecord) if f.name not in _WORKER_PLACE)
#: A worker's process, as the executor reports it (not a field of the scheduler's record).
_PROCESS = ("pid", "pid_started", "log", "image")


@functools.lru_cache(maxsize=4096)
def ask_json(ask: Ask) -> str:
    """The ``Ask`` as compact JSON (its fields in order; ``models`` a sorted list, or null).

    Kept per ask (an ``Ask`` is frozen): an array's copies share theirs, and a step that makes
    10,000 of them encodes it once."""
    data = {f.name: getattr(ask, f.name) for f in fields(Ask)}
    data["models"] = sorted(ask.models) if ask.models is not None else None
    return json.dumps(data, separators=(",", ":"))


def ask_of(text: str) -> Ask:
    data = json.loads(text)
    models = data.pop("models")
    return Ask(models=frozenset(models) if models is not None else None, **data)


def machine_json(m: Machine) -> str:
    """A machine's fields but its name, as JSON (a ``machines`` row's ``spec``)."""
    return json.dumps({f.name: getattr(m, f.name) for f in fields(Machine) if f.name != "name"})


def run_record(row: Mapping[str, Any]) -> RunRecord:
    """The scheduler's record of a run row."""
    values = {f: row[f] for f in RUN_FIELDS}
    values["state"] = RunState(row["state"])
    return RunRecord(
        name=row["name"],
        run=Run.model_validate(json.loads(row["document"])),
        seq=row["seq"],
        submitted_at=row["created_at"],
        **values,
    )


def worker_record(row: Mapping[str, Any]) -> WorkerRecord:
    """The scheduler's record of a worker row."""
    values = {f: row[f] for f in WORKER_FIELDS}
    values["state"] = WorkerState(row["state"])
    return WorkerRecord(
        name=row["name"],
        run=row["run"],
        rank=row["rank"],
        world_size=row["world_size"],
        ask=ask_of(row["ask"]),
        group=row["group"],
        group_rank=row["group_rank"],
        **values,
    )


def run_values(r: RunRecord) -> dict[str, Any]:
    out = {f: getattr(r, f) for f in RUN_FIELDS}
    out["state"] = str(r.state)
    return out


def worker_values(w: WorkerRecord) -> dict[str, Any]:
    out = {f: getattr(w, f) for f in WORKER_FIELDS}
    out["state"] = str(w.state)
    return out


@dataclass
class TickWrite:
    """What one tick changed: written by ``Store.commit_tick`` in one transaction."""

    now: float
    new_workers: list[WorkerRecord]
    workers: list[WorkerRecord]
    runs: list[RunRecord]
    events: list[dict[str, Any]]
    #: Per-worker process facts from the executor: {name: {"pid", "pid_started", "log"}}.
    processes: dict[str, dict[str, Any]]
    #: The GPUs' holds the tick opened and closed (``usage``): GPU-hours
    holds: HoldChanges | None = None


@dataclass
class TickRows:
    """A tick's writes as rows: workers to insert, and changes keyed by ``b_name`` (the row's name)."""

    new_workers: list[dict[str, Any]] = field(default_factory=list)
    workers: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    #: Runs that are running: ``started_at`` is set where it is still empty.
    started: list[dict[str, Any]] = field(default_factory=list)


def tick_rows(tick: TickWrite) -> TickRows:
    """The rows a tick writes: its new workers whole, the others' changed fields, its runs'."""
    out = TickRows()
    for w in tick.new_workers:
        row = {
            "name": w.name,
            "run": w.run,
            "rank": w.rank,
            "world_size": w.world_size,
            "group": w.group,
            "group_rank": w.group_rank,
            "ask": ask_json(w.ask),
            **worker_values(w),
            **dict.fromkeys(_PROCESS),
        }
        row.update(tick.processes.get(w.name, {}))
        out.new_workers.append(row)
    new_names = {w.name for w in tick.new_workers}
    for w in tick.workers:
        if w.name in new_names:
            continue
        row = {"b_name": w.name, **worker_values(w)}
        proc = tick.processes.get(w.name)
        row.update(proc if proc is not None else {})
        out.workers.append(row)
    for r in tick.runs:
        row = {"b_name": r.name, **run_values(r), "updated_at": tick.now}
        if r.state in FINAL_RUN_STATES:
            row["finished_at"] = tick.now
        out.runs.append(row)
    out.started = [{"b_name": r.name, "started_at": r.running_since} for r in tick.runs if r.running_since]
    return out
