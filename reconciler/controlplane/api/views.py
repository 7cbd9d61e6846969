"""The engine's runs and workers as the API answers them: ``wire`` models, made from its records.

Owns: ``run_view`` (a ``wire.Run``), ``run_brief`` (a ``wire.briefs.RunBrief``, as a dict) and
``brief_moving`` (what of it moves without a resource_version),
``worker_view`` (a ``wire.Worker``), ``workers_text`` (a ``wire.WorkerList``, as JSON),
``worker_page`` (a page of the workspace's workers: ``wire.WorkerPage``),
``machine_views`` (the inventory: ``wire.Machine``).
Reads the engine's state and run metadata; changes nothing. Runs and workers are named by their
keys (``scopes``) in the engine; a view shows their plain names, as their workspace knows them.
Must not touch: HTTP, the store, scheduling rules (the readout's words are the vocabulary's).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Collection
from functools import lru_cache
from typing import Any

import orjson

from reconciler.runspec.rerun import RERUN_INDICES, RERUN_SIZE, ArrayMap, array_map

from ...wire import models as wire
from ..engine import Engine
from ..scheduler import HOLDING, Free, WorkerRecord, WorkerState, readout
from ..scopes import shown

__all__ = [
    "brief_moving",
    "machine_views",
    "run_brief",
    "run_metadata",
    "run_status",
    "run_view",
    "worker_page",
    "worker_view",
    "workers_text",
]


def run_metadata(engine: Engine, name: str) -> wire.RunMetadata:
    """The run's metadata as submitted, with its resource_version."""
    meta = engine.meta[name]
    return wire.RunMetadata.model_validate(
        {**meta.document["metadata"], "resource_version": meta.resource_version}
    )


def run_status(
    engine: Engine, name: str, runs_url: str, workspace: str
) -> tuple[wire.RunStatus, dict[str, int]]:
    """The run's status and its task counts (``runs_url``: the runs' URL; its own is that and
    its name). An array not admitted yet counts its whole size as pending (not one on a
    schedule: it is never admitted, and holds no workers)."""
    s = engine.state
    r = s.runs[name]
    meta = engine.meta[name]
    ws = s.workers_of(name)
    running = sum(1 for w in ws if w.state is WorkerState.RUNNING)
    counts = s.task_counts(name)
    if not r.admitted and r.run.spec.array is not None and r.run.spec.schedule is None:
        counts = {str(WorkerState.PENDING): r.run.spec.array.size}
    total = len(ws) or sum(counts.values())
    status = wire.RunStatus(
        state=r.state,
        reason=r.reason,
        created_at=meta.created_at,
        started_at=meta.started_at,
        finished_at=meta.finished_at,
        workers=total,
        workers_running=running,
        gpus_held=sum(w.gpus for w in ws if w.state in HOLDING),
        restarts=r.restarts,
        readout=readout(running, total),
        workspace=workspace,
        url=runs_url + shown(name),
        schedule=_schedule(engine, name),
    )
    return status, counts


def run_brief(engine: Engine, name: str) -> dict[str, Any]:
    """The run as ``GET /runs?view=brief`` lists it (a ``wire.briefs.RunBrief``), made without a
    model: ``run_status``'s values of the same names (a test holds the two equal), from the
    state's counts; the workers are read only for the GPUs of a run that holds some."""
    s = engine.state
    r = s.runs[name]
    meta = engine.meta[name]
    about = meta.document["metadata"]
    if not r.admitted and r.run.spec.array is not None and r.run.spec.schedule is None:
        counts = {str(WorkerState.PENDING): r.run.spec.array.size}
    else:
        counts = s.task_counts(name)
    have = s.counts[name]
    holding = bool(have) and any(have.get(state) for state in HOLDING)
    schedule = _schedule(engine, name) if "schedule" in meta.document["spec"] else None
    return {
        "name": shown(name),
        "labels": about.get("labels") or {},
        "annotations": about.get("annotations") or {},
        "state": str(r.state),
        "reason": r.reason,
        "created_at": meta.created_at,
        "workers_running": have.get(WorkerState.RUNNING, 0),
        "gpus_held": sum(w.gpus for w in s.workers_of(name) if w.state in HOLDING) if holding else 0,
        "task_counts": counts,
        "schedule": None if schedule is None else schedule.model_dump(),
    }


def brief_moving(engine: Engine, name: str) -> tuple[Any, ...] | None:
    """What ``run_brief`` reads that moves without the run's resource_version (its state and
    reason, whether it is admitted, its workers by state, the GPUs they hold), made without the
    brief: while it holds, the brief is the same. ``None`` for a run on a schedule (its next
    time moves with the clock)."""
    if "schedule" in engine.meta[name].document["spec"]:
        return None
    s = engine.state
    r = s.runs[name]
    have = s.counts[name]
    holding = bool(have) and any(have.get(state) for state in HOLDING)
    gpus = sum(w.gpus for w in s.workers_of(name) if w.state in HOLDING) if holding else 0
    return (r.state, r.reason, r.admitted, tuple(have.items()), gpus)


def _schedule(engine: Engine, name: str) -> wire.ScheduleStatus | None:
    """The run's schedule (``Engine.schedules``), or ``None``."""
    if "schedule" not in engine.meta[name].document["spec"]:
        return None
    found = engine.schedules.status(name)
    return None if found is None else wire.ScheduleStatus(**found)


def run_view(engine: Engine, name: str, runs_url: str, workspace: str) -> wire.Run:
    """The run ``name`` (``ResponseCache.run_text`` is its twin, for the listing)."""
    status, counts = run_status(engine, name, runs_url, workspace)
    return wire.Run(
        metadata=run_metadata(engine, name),
        spec=engine.meta[name].document["spec"],
        status=status,
        task_counts=counts,
    )


#: The fields of a worker's answer (``wire.Worker``) the view says in its own way; every other
#: one is the record's field of the same name.
_SAID = frozenset({"name", "run", "rank", "machine", "image"})
_COPIED = tuple(f for f in wire.Worker.model_fields if f not in _SAID)


@lru_cache(maxsize=64)
def _rerun_map(indices: str, size: str) -> ArrayMap | None:
    return array_map({RERUN_INDICES: indices, RERUN_SIZE: size})


def _rank_map(engine: Engine, run: str) -> ArrayMap | None:
    """How a rerun's copies' ranks map onto the original array's indices; ``None``: as they are."""
    meta = engine.meta.get(run)
    notes = (meta.document.get("metadata") or {}).get("annotations") if meta is not None else None
    if not notes or RERUN_INDICES not in notes:
        return None
    return _rerun_map(str(notes[RERUN_INDICES]), str(notes.get(RERUN_SIZE, "")))


def shown_rank(engine: Engine, w: WorkerRecord) -> int:
    """The rank a worker sees in its environment (``RANK``): a rerun's copy, its original index."""
    mapped = _rank_map(engine, w.run)
    return mapped.index(w.rank) if mapped is not None else w.rank


def worker_view(engine: Engine, w: WorkerRecord) -> wire.Worker:
    proc = engine.processes.get(w.name) or {}
    return wire.Worker(
        name=shown(w.name),
        run=shown(w.run),
        rank=shown_rank(engine, w),
        machine=w.machine if w.state is not WorkerState.PENDING else None,
        image=proc.get("image") or engine.state.template(w).image,
        **{f: getattr(w, f) for f in _COPIED},
    )


#: A ``wire.Worker``'s fields, in order.
_FIELDS = tuple(wire.Worker.model_fields)


def workers_text(engine: Engine, run: str) -> bytes:
    """The run's workers by rank, its readout and its counts: a ``wire.WorkerList`` as JSON,
    each worker ``worker_view``'s (a test holds the two equal), made without a model per worker
    (an array's 10,000 models took more of the answer's time than anything else), what is the
    run's read once."""
    s = engine.state
    ws = sorted(s.workers_of(run), key=lambda w: w.rank)
    mapped, shown_run = _rank_map(engine, run), shown(run)
    images: dict[str | None, str | None] = {}
    items = []
    for w in ws:
        image = (engine.processes.get(w.name) or {}).get("image")
        if not image:
            if w.group not in images:
                images[w.group] = s.template(w).image
            image = images[w.group]
        said = {
            "name": shown(w.name),
            "run": shown_run,
            "rank": mapped.index(w.rank) if mapped is not None else w.rank,
            "machine": w.machine if w.state is not WorkerState.PENDING else None,
            "image": image,
        }
        items.append({f: said[f] if f in _SAID else getattr(w, f) for f in _FIELDS})
    running = sum(1 for w in ws if w.state is WorkerState.RUNNING)
    listing = {"items": items, "readout": readout(running, len(ws)), "task_counts": s.task_counts(run)}
    return orjson.dumps(listing)


def worker_page(
    engine: Engine,
    scope: Collection[str],
    runs: Collection[str] | None,
    states: Collection[WorkerState] | None,
    limit: int | None,
    after: tuple[int, int] | None,
) -> tuple[wire.WorkerPage, tuple[int, int] | None]:
    """One page of the workers of ``runs`` (keys; ``None``: every run of ``scope``, the keys of
    a workspace's runs in submission order) in ``states`` (``None``: any):
    runs in submission order, each run's by rank, from just after ``after`` (a run's sequence
    number and a rank), at most ``limit`` of them. With the position of the page's last worker
    when more follow (the next page starts after it), else ``None``.

    The totals come from the state's counts (no worker is read for them); only the page's
    workers are made into views."""
    s = engine.state
    chosen = [s.runs[name] for name in scope if runs is None or name in runs]
    counts: Counter[str] = Counter()
    for r in chosen:
        for state, n in s.counts[r.name].items():
            if n and (states is None or state in states):
                counts[str(state)] += n
    items: list[wire.Worker] = []
    last: tuple[int, int] | None = None
    more = False
    for r in chosen:
        if after is not None and r.seq < after[0]:
            continue
        ws = sorted((s.workers[n] for n in s.run_workers[r.name]), key=lambda w: w.rank)
        start = bisect_right(ws, after[1], key=lambda w: w.rank) if after and r.seq == after[0] else 0
        for w in ws[start:]:
            if states is not None and w.state not in states:
                continue
            if limit is not None and len(items) == limit:
                more = True
                break
            items.append(worker_view(engine, w))
            last = (r.seq, w.rank)
        if more:
            break
    page = wire.WorkerPage(
        items=items, total=sum(counts.values()), task_counts=dict(sorted(counts.items())), continue_=None
    )
    return page, last if more else None


def machine_views(engine: Engine) -> list[wire.Machine]:
    """Every machine, its state, and the GPUs and CPU cores free on it now."""
    s = engine.state
    items = []
    for m in engine.store.machine_rows(engine.cluster):
        free = s.free.get(m["name"]) or Free(0, 0, 0, 0)  # a machine the inventory does not know
        state = "Down" if m["name"] in s.down else m["state"]
        items.append(
            wire.Machine.model_validate(
                {**m, "state": state, "free_gpus": free.gpus, "free_cpu_cores": free.cpu_cores}
            )
        )
    return items
