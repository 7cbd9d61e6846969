"""The tick: one pass of pure decisions over the state at ``now``, in a fixed order of phases.

Owns: ``plan_tick`` (the phases, in order: cancellations, settling ended workers, time limits,
Stale workers counted as lost, gang barriers, starts, run states, placement), ``schedule`` (one
tick over plain records, as a store loads them), and ``Tick``, a tick's working state that every
phase shares: the decisions so far (``emit``), the runs whose fate this tick settled as a whole
(``frozen``), failing a run (``fail_run``), the capacity the tick has laid over the state's
(``view``), and what it placed for each workspace (``quotas`` reads it). Also the two phases
that belong to no other concern: cancellations and the runs' states and reasons.

Must not touch: the records (``plan_tick`` only reads ``state``; ``ClusterState.apply`` carries
the decisions out), clocks (``now`` is an argument), I/O, randomness.
"""

from __future__ import annotations

from collections import Counter
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

from ..inventory import Inventory
from .arrays import failed_reason
from .gangs import barriers, starts
from .placement import Memo, View
from .queue import placement
from .records import (
    ENDED,
    HOLDING,
    Decision,
    MarkRun,
    MarkWorker,
    PlaceWorker,
    RunRecord,
    StopCause,
    StopWorker,
    WorkerRecord,
)
from .restarts import settle, stale_workers, time_limits
from .state import ClusterState

__all__ = ["Tick", "cancellations", "plan_tick", "run_states", "schedule"]


class Tick:
    """One tick's working state: what it decided so far, and what that settles for the rest of it."""

    def __init__(self, state: ClusterState, now: float) -> None:
        self.s, self.now = state, now
        self.out: list[Decision] = []
        self.touched: set[str] = set()
        self.view = View(state)
        self.memo = Memo()
        #: The first run blocked for room; later runs may only backfill (``priorities``).
        self.blocker: RunRecord | None = None
        #: When the blocker could start (``priorities.shadow``), once estimated.
        self.shadow_at: float | None = None
        self.placed: set[tuple[str, str]] = set()
        #: Runs whose fate this tick decided as a whole (cancelled, failed, restarted): no more for them.
        self.frozen: set[str] = set()
        self.marked: set[str] = set()
        #: What this tick placed, by workspace: GPUs, and runs it started (``quotas``).
        self.ws_gpus: Counter[str] = Counter()
        self.ws_started: Counter[str] = Counter()
        self.ws_started_runs: set[str] = set()

    def emit(self, d: Decision, run: str) -> None:
        self.out.append(d)
        self.touched.add(run)
        if isinstance(d, PlaceWorker):
            self.placed.add((run, d.machine))
            ws = self.s.ws_of[run]
            self.ws_gpus[ws] += d.gpus
            if run not in self.ws_started_runs and self.s.holding(run) == 0:
                self.ws_started_runs.add(run)
                self.ws_started[ws] += 1
        elif isinstance(d, MarkRun):
            self.marked.add(run)

    def policy(self, w: WorkerRecord) -> str:
        return self.s.template(w).restart_policy

    def fail_run(self, r: RunRecord, reason: str, skip: str | None = None) -> None:
        """Fail ``r``: stop its placed workers, and mark the waiting ones never run (but ``skip``)."""
        self.frozen.add(r.name)
        for w in self.s.workers_of(r.name):
            if w.name == skip:
                continue
            if w.state in HOLDING:
                self.emit(
                    StopWorker(w.name, StopCause.RUN_FAILED, WorkerState.STOPPED, f"Stopped: {reason}"),
                    r.name,
                )
            elif w.state is WorkerState.PENDING or (w.state in ENDED and not w.settled):
                self.emit(MarkWorker(w.name, WorkerState.STOPPED, f"Not run: {reason}", final=True), r.name)
        self.emit(MarkRun(r.name, RunState.FAILED, reason), r.name)


def cancellations(t: Tick) -> None:
    """Runs a user cancelled: every worker stopped (or never run), the run Cancelled."""
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
    """Each admitted run's state and reason from its workers', where no phase decided it already."""
    s = t.s
    for rname in list(s.active):
        if rname in t.touched:
            continue
        r = s.runs[rname]
        if not r.admitted:
            continue
        n = len(s.run_workers[rname])
        if n == 0:
            continue
        c = s.counts[rname]
        done, failed = s.final_counts[rname]
        running = c[WorkerState.RUNNING]
        if done == n and not r.service:
            if failed == 0:
                state, reason = RunState.COMPLETED, all_completed(n)
            elif r.is_array:
                state, reason = RunState.FAILED, failed_reason(failed, n, r.first_failure)
            else:
                state, reason = RunState.FAILED, r.first_failure or "A worker failed"
        elif r.start == "Gang" and s.holding(rname) > 0 and running < n:
            state = RunState.RUNNING if r.state is RunState.RUNNING and running > 0 else RunState.STARTING
            if state is RunState.STARTING:
                ready = c[WorkerState.READY] + running
                reason = (
                    f"Placed whole on {s.holding(rname)} machines; {ready} of {n} ready at the "
                    f"barrier (it waits at most {GANG_BARRIER_SECONDS // 60} minutes)"
                )
            else:
                reason = readout(running, n)
        elif running > 0:
            state, reason = RunState.RUNNING, readout(running, n)
        else:
            state, reason = RunState.PENDING, r.reason if r.state is RunState.PENDING else QUEUED
        if (state, reason) != (r.state, r.reason):
            t.emit(MarkRun(rname, state, reason), rname)


def plan_tick(state: ClusterState, now: float) -> list[Decision]:
    """This tick's decisions; pure: reads ``state`` and ``now`` only."""
    t = Tick(state, now)
    cancellations(t)
    settle(t)
    time_limits(t)
    stale_workers(t)
    barriers(t)
    starts(t)
    run_states(t)
    placement(t)
    return t.out


def schedule(
    inventory: Inventory, runs: Iterable[RunRecord], workers: Iterable[WorkerRecord], now: float
) -> list[Decision]:
    """One tick over plain records (what a store loads): the indexes are built, then ``plan_tick``."""
    state = ClusterState(
        inventory,
        {r.name: r for r in runs},
        {w.name: w for w in workers},
    )
    return plan_tick(state, now)
