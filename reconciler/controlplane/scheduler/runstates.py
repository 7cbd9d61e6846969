"""The runs' own phases: cancellations, and each run's state and reason from its workers'.

Owns ``cancellations`` (a run a user cancelled: every worker stopped or never run, the run
Cancelled) and ``run_states`` (each admitted run's state and reason, where no phase of the tick
decided it already), with ``run_state``, that state and reason read from a run's own records.
They belong to no other phase's concern; ``tick.plan_tick`` calls them in its order.

Must not touch: the records (decisions go through ``Tick.emit``), clocks, I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

from reconciler.runspec.messages import GANG_BARRIER_SECONDS
from reconciler.runspec.vocabulary import (
    CANCELLED_BY_USER,
    QUEUED,
    RunState,
    WorkerState,
    all_completed,
    readout,
)

from .arrays import failed_reason
from .records import ENDED, HOLDING, MarkRun, MarkWorker, RunRecord, StopCause, StopWorker
from .restarting import restarting, says_restarting
from .state import ClusterState
from .ticking import Tick

__all__ = ["cancellations", "run_state", "run_states"]


def cancellations(t: Tick) -> None:
    """Runs a user cancelled: every worker stopped (or never run), the run Cancelled."""
    if not t.s.cancelling:  # the runs asked to cancel and not finished: none, nothing to look at
        return
    for name in list(t.s.active):
        r = t.s.runs[name]
        if not r.cancel_requested:
            continue
        for w in t.s.workers_of(name):
            if w.state in HOLDING:
                t.emit(StopWorker(w.name, StopCause.CANCELLED, WorkerState.STOPPED, CANCELLED_BY_USER), name)
            elif w.state is WorkerState.PENDING or (w.state in ENDED and not w.settled):
                t.emit(MarkWorker(w.name, WorkerState.STOPPED, CANCELLED_BY_USER, final=True), name)
        t.emit(MarkRun(name, RunState.CANCELLED, CANCELLED_BY_USER), name)
        t.frozen.add(name)


def run_states(t: Tick) -> None:
    """Each admitted run's state and reason from its workers', where no phase decided it already.

    Both come from the run's own records only: with the tick's memo (``quiet``), only the runs
    changed since they were last found right are looked at (``Quiet.stale``), in the same order."""
    s = t.s
    if t.quiet is None:
        names: Iterable[str] = list(s.active)
    else:
        stale, t.quiet.stale = t.quiet.stale, {}
        runs, active = s.runs, s.active
        names = sorted((n for n in stale if n in active), key=lambda n: runs[n].seq)
    for rname in names:
        if rname in t.touched:
            if t.quiet is not None:
                t.quiet.stale[rname] = None  # decided by another phase: looked at again next tick
            continue
        r = s.runs[rname]
        found = run_state(s, r)
        if found is not None and found != (r.state, r.reason):
            t.emit(MarkRun(rname, *found), rname)
            if t.quiet is not None:
                t.quiet.stale[rname] = None


def run_state(s: ClusterState, r: RunRecord) -> tuple[RunState, str] | None:
    """An admitted run's state and reason from its workers' (``None``: not admitted, no workers);
    workers waiting out a restart's backoff are said at the run's level (``restarting``)."""
    rname = r.name
    if not r.admitted:
        return None
    n = len(s.run_workers[rname])
    if n == 0:
        return None
    c = s.counts[rname]
    done, failed = s.final_counts[rname]
    running = c[WorkerState.RUNNING]
    if done == n and not r.service:
        if failed == 0:
            return RunState.COMPLETED, all_completed(n)
        if r.is_array:
            return RunState.FAILED, failed_reason(failed, n, r.first_failure)
        return RunState.FAILED, r.first_failure or "A worker failed"
    if r.start == "Gang" and s.holding(rname) > 0 and running < n:
        if r.state is RunState.RUNNING and running > 0:
            return RunState.RUNNING, readout(running, n)
        ready = c[WorkerState.READY] + running
        return RunState.STARTING, (
            f"Placed whole on {s.holding(rname)} machines; {ready} of {n} ready at the "
            f"barrier (it waits at most {GANG_BARRIER_SECONDS // 60} minutes)"
        )
    again = restarting(s, r, n)
    if running > 0:
        return RunState.RUNNING, readout(running, n) + (f"; {again}" if again else "")
    if again is not None:
        return RunState.PENDING, again
    if r.state is RunState.PENDING and not says_restarting(r.reason):
        return RunState.PENDING, r.reason
    return RunState.PENDING, QUEUED
