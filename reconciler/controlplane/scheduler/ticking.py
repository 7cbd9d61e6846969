"""One tick's working state, which every phase of the tick reads and adds to: ``Tick``.

Owns ``Tick``: the state and ``now`` it decides over, the decisions so far (``emit``), the runs
whose fate this tick settled as a whole (``frozen``), failing a run (``fail_run``), the
capacity the tick has laid over the state's (``view``, a ``placement.View``) and what it learned
once (``memo``, a ``placement.Memo``), what it placed for each workspace (``quotas`` reads it),
the first run blocked for room and when it could start (``priorities`` sets them), and the memo
kept across ticks (``quiet``: ``None`` when the tick decides without it, the same decisions);
and ``Admissions``, how many workers a driver lets its ticks make by admitting runs.

It sits below every phase (``restarts``, ``gangs``, ``quotas``, ``priorities``, ``runstates``,
``queue``) and above what it holds (``state``, ``placement``, ``quiet``, ``records``): the
phases pass it to each other, and none of them is imported here.

Must not touch: the records (``ClusterState.apply`` carries the decisions out), clocks (``now``
is an argument), I/O, randomness.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from dataclasses import dataclass

from reconciler.runspec.vocabulary import RunState, WorkerState

from .placement import Memo, View
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
from .state import ClusterState

__all__ = ["ADMIT_RUN_COST", "Admissions", "Tick"]

#: What admitting a run costs of a driver's ``Admissions`` besides the workers it makes (the
#: engine's steps, the outlook's dry run).
ADMIT_RUN_COST = 10


@dataclass(slots=True)
class Admissions:
    """How much more admitting runs may do in a driver's ticks: each run admitted costs
    ``per_run`` and one for each worker it makes (an array's copies, a task group's replicas); a
    run is admitted whole, then counted. Once nothing is left, the placement phase stops at the
    next run still to admit, and serves no run after it (so no run queued behind it is served
    first: ``cut``); the driver steps again (``Engine.more``). The simulation gives none: every
    run is admitted in its tick; the outlook gives one for the runs ahead of those it is asked
    about (``outlook.AHEAD``)."""

    left: int
    per_run: int = 0
    cut: bool = False


class Tick:
    """One tick's working state: what it decided so far, and what that settles for the rest of it."""

    def __init__(
        self, state: ClusterState, now: float, quiet: bool = True, admissions: Admissions | None = None
    ) -> None:
        self.s, self.now = state, now
        #: How many more workers admitting runs may make (``None``: no bound).
        self.admissions = admissions
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
        #: The quotas' answers so far, by workspace, GPUs asked and whether the run starts, with
        #: what the tick had placed in the workspace when asked (``quotas.quota_answer``).
        self.quota_answers: dict[tuple[str, int, bool], tuple[tuple[int, int], str | None]] = {}

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
