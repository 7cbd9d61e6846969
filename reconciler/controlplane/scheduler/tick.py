"""The tick: one pass of pure decisions over the state at ``now``, in a fixed order of phases.

Owns: ``plan_tick`` (the phases, in order: cancellations, settling ended workers, time limits,
Stale workers counted as lost, gang barriers, starts, run states, placement), ``schedule`` (one
tick over plain records, as a store loads them), and ``Tick``, a tick's working state that every
phase shares: the decisions so far (``emit``), the runs whose fate this tick settled as a whole
(``frozen``), failing a run (``fail_run``), the capacity the tick has laid over the state's
(``view``), what it placed for each workspace (``quotas`` reads it), and the memo kept across
ticks (``quiet``: ``plan_tick(..., quiet=False)`` decides without it, the same decisions). Also
the two phases that belong to no other concern: cancellations and the runs' states and reasons.

Must not touch: the records (``plan_tick`` only reads ``state``; ``ClusterState.apply`` carries
the decisions out), clocks (``now`` is an argument), I/O, randomness.
"""

from __future__ import annotations

import math
import sys
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
from .priorities import shadow
from .queue import placement
from .quiet import Quiet
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
from .restarting import restarting, says_restarting
from .restarts import settle, stale_workers, time_limits
from .state import ClusterState

__all__ = ["Tick", "cancellations", "plan_tick", "run_state", "run_states", "schedule"]


class Tick:
    """One tick's working state: what it decided so far, and what that settles for the rest of it."""

    def __init__(self, state: ClusterState, now: float, quiet: bool = True) -> None:
        self.s, self.now = state, now
        self.out: list[Decision] = []
        self.touched: set[str] = set()
        self.view = View(state)
        self.memo = Memo()
        #: The memo kept across ticks (``quiet``), or ``None``: every run is visited.
        self.quiet: Quiet | None = state.quiet if quiet else None
        #: While a run is placed: the earliest one of its waiting workers not yet eligible may be.
        self.until = math.inf
        #: The lowest priority of a worker holding a machine (none: the largest int): a run of
        #: higher priority may preempt (``priorities.preempt_for``'s first check).
        held = state.holding_priorities
        self.lowest = min(held) if held else sys.maxsize
        #: The first run blocked for room; later runs may only backfill (``priorities``).
        self.blocker: RunRecord | None = None
        #: When the blocker could start (``priorities.shadow``), once estimated.
        self.shadow_at: float | None = None
        self.placed: set[tuple[str, str]] = set()
        self.placed_runs: set[str] = set()
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
            self.placed_runs.add(run)
            ws = self.s.ws_of[run]
            self.ws_gpus[ws] += d.gpus
            if run not in self.ws_started_runs and self.s.holding(run) == 0:
                self.ws_started_runs.add(run)
                self.ws_started[ws] += 1
        elif isinstance(d, MarkRun):
            self.marked.add(run)

    def shadow(self) -> float:
        """When the blocked run could start (``priorities.shadow``: estimated once a tick)."""
        return self.shadow_at if self.shadow_at is not None else shadow(self)

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


def plan_tick(state: ClusterState, now: float, *, quiet: bool = True) -> list[Decision]:
    """This tick's decisions; pure: reads ``state`` and ``now`` only.

    ``quiet``: with the memo the state keeps across ticks (``quiet.Quiet``), which passes over
    the waiting runs whose answer cannot have changed; without it, every run is visited. The
    decisions are the same either way."""
    t = Tick(state, now, quiet)
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
