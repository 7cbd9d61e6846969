"""Simulated time for the control plane: a scripted executor and the driver loop over the scheduler.

Owns: ``Outcome`` (what a worker does once placed: how long it prepares, how long it pulls its
image, how long it runs, its exit code), ``SimulatedExecutor`` (turns ``PlaceWorker``/
``StartWorker``/``StopWorker`` into timed observations) and ``Simulation`` (submit runs, script
outcomes, lose machines, ``advance`` simulated seconds: a 10-restart backoff, a 15-minute
barrier, a 5-minute Stale timeout or a 12-hour limit take milliseconds). Tests and benchmarks
drive the scheduler through it.

Must not touch: real clocks, processes, files, the store. It calls only ``plan_tick``,
``ClusterState.apply``/``observe``/``next_wakeup``, the same steps the server's loop will call.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.runspec.models import Run
from reconciler.runspec.parse import parse_run

from .clock import ManualClock
from .inventory import Inventory, default_inventory
from .scheduler import (
    CancelRun,
    ClusterState,
    Decision,
    ImagePulling,
    LoseWorker,
    MachineBack,
    MachineLost,
    MachineUnreachable,
    Observation,
    PlaceWorker,
    Quota,
    RunRecord,
    StartWorker,
    StopWorker,
    WorkerExited,
    WorkerReady,
    WorkerRecord,
    plan_tick,
)
from .scopes import DEFAULT, Scope, run_key

__all__ = ["Outcome", "SimulatedExecutor", "Simulation"]

#: More decisions-only ticks than this at one instant means the scheduler does not settle.
MAX_TICKS_PER_INSTANT = 10_000


@dataclass(frozen=True, slots=True)
class Outcome:
    """One placement of a worker: prepared after ``prepare`` s, its image pulled ``pull`` s later
    (then ready), and once started, exits with ``exit_code`` after ``after`` s.

    ``after=None``: runs until stopped. ``prepare=None``: never gets ready (a hung preparation).
    ``pull``: 0 (the image is there): no Pulling state; ``None``: a pull that never ends.
    """

    exit_code: int = 0
    after: float | None = 60.0
    prepare: float | None = 0.0
    pull: float | None = 0.0


class SimulatedExecutor:
    """Does what decisions ask, in simulated time: one scripted ``Outcome`` per placement."""

    def __init__(self, default: Outcome) -> None:
        self.default = default
        self.scripts: dict[str, list[Outcome]] = {}
        self.run_defaults: dict[str, Outcome] = {}
        self.placements: dict[str, int] = {}
        self.current: dict[str, Outcome] = {}
        self.incarnation: dict[str, int] = {}
        self.events: list[tuple[float, int, int, Observation]] = []
        self._seq = 0

    def at(self, when: float, event: Observation, incarnation: int = -1) -> None:
        self._seq += 1
        heapq.heappush(self.events, (when, self._seq, incarnation, event))

    def outcome_for(self, worker: WorkerRecord) -> Outcome:
        k = self.placements.get(worker.name, 0)
        self.placements[worker.name] = k + 1
        script = self.scripts.get(worker.name)
        if script:
            return script[min(k, len(script) - 1)]
        return self.run_defaults.get(worker.run, self.default)

    def handle(self, d: Decision, state: ClusterState, now: float) -> None:
        if isinstance(d, PlaceWorker):
            w = state.workers[d.worker]
            inc = self.incarnation.get(w.name, 0) + 1
            self.incarnation[w.name] = inc
            outcome = self.outcome_for(w)
            self.current[w.name] = outcome
            if outcome.prepare is None:
                return
            if outcome.pull != 0:
                self.at(now + outcome.prepare, ImagePulling(w.name), inc)
            if outcome.pull is not None:
                self.at(now + outcome.prepare + outcome.pull, WorkerReady(w.name), inc)
        elif isinstance(d, StartWorker):
            outcome = self.current.get(d.worker, self.default)
            if outcome.after is not None:
                inc = self.incarnation.get(d.worker, 0)
                self.at(now + outcome.after, WorkerExited(d.worker, outcome.exit_code), inc)
        elif isinstance(d, StopWorker | LoseWorker):  # what it does now goes unheard
            self.incarnation[d.worker] = self.incarnation.get(d.worker, 0) + 1

    def next_time(self) -> float | None:
        return self.events[0][0] if self.events else None

    def pop_due(self, now: float, *, ended: bool = True) -> list[Observation]:
        """The events due by ``now`` (``ended`` is the process executor's: here every event is
        queued by its time, so there is nothing to poll)."""
        out = []
        while self.events and self.events[0][0] <= now:
            _, _, inc, event = heapq.heappop(self.events)
            worker = getattr(event, "worker", None)
            if inc != -1 and worker is not None and self.incarnation.get(worker) != inc:
                continue
            out.append(event)
        return out


class Simulation:
    """The scheduler, a simulated executor and a manual clock, driven to a fixed point each instant.

    ``observer(sim, decisions)`` is called after every tick (property tests check invariants there).
    """

    def __init__(
        self,
        inventory: Inventory | None = None,
        *,
        default: Outcome = Outcome(),
        observer: Callable[[Simulation, list[Decision]], None] | None = None,
        keep_log: bool = True,
    ) -> None:
        self.clock = ManualClock()
        self.state = ClusterState(inventory or default_inventory())
        self.executor = SimulatedExecutor(default)
        self.observer = observer
        self.keep_log = keep_log
        self.log: list[tuple[float, Decision]] = []
        self.ticks = 0

    @property
    def now(self) -> float:
        return self.clock.now()

    # -- input ------------------------------------------------------------------------------

    def submit(
        self,
        run: Run | Mapping[str, Any],
        outcome: Outcome | None = None,
        scripts: Mapping[str, Outcome | list[Outcome]] | None = None,
        workspace: str | None = None,
    ) -> RunRecord:
        """Submit a run (a ``Run`` or a document, validated by ``parse_run``) and settle; in
        ``workspace`` of org default (left out: the default workspace), under its key
        (``key(name, workspace)``: what ``run``, ``worker`` and scripts name it by)."""
        model = run if isinstance(run, Run) else parse_run(dict(run))
        name = self.key(model.metadata.name, workspace)
        if outcome is not None:
            self.executor.run_defaults[name] = outcome
        for worker, script in (scripts or {}).items():
            self.script(worker, *(script if isinstance(script, list) else [script]))
        record = self.state.submit(model, self.now, name)
        self._settle()
        return record

    @staticmethod
    def key(name: str, workspace: str | None = None) -> str:
        """The key of run (or worker) ``name`` of ``workspace`` (of org default; ``None``: the default)."""
        return run_key(Scope(DEFAULT, workspace or DEFAULT, DEFAULT), name)

    def set_quota(self, workspace: str, gpus: int | None = None, runs: int | None = None) -> None:
        """Set workspace ``workspace``'s quota (of org default) and settle."""
        self.state.set_quota(f"{DEFAULT}/{workspace}", Quota(gpus, runs))
        self._settle()

    def script(self, worker: str, *outcomes: Outcome) -> None:
        """What ``worker`` does on each placement, in order; the last one repeats."""
        self.executor.scripts[worker] = list(outcomes)

    def cancel(self, run: str) -> None:
        self.observe(CancelRun(run))

    def lose_machine(self, machine: str, at: float | None = None) -> None:
        self._observe_at(MachineLost(machine), at)

    def machine_unreachable(self, machine: str, at: float | None = None) -> None:
        self._observe_at(MachineUnreachable(machine), at)

    def machine_back(self, machine: str, at: float | None = None) -> None:
        self._observe_at(MachineBack(machine), at)

    def observe(self, event: Observation) -> None:
        self.state.observe(event, self.now)
        self._settle()

    def _observe_at(self, event: Observation, at: float | None) -> None:
        if at is None or at <= self.now:
            self.observe(event)
        else:
            self.executor.at(at, event)

    # -- time -------------------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` of simulated time pass, handling every event and timer on the way."""
        end = self.now + seconds
        self._settle()
        while True:
            wake = self.state.next_wakeup(self.now)
            ev = self.executor.next_time()
            nxt = min((t for t in (wake, ev) if t is not None), default=None)
            if nxt is None or nxt > end:
                break
            self.clock.set(max(nxt, self.now))
            self._settle()
        self.clock.set(end)
        self._settle()

    def run_until_done(self, limit: float = 365 * 86400.0) -> None:
        """Advance until every run has ended (or nothing more can happen, or ``limit`` passes)."""
        end = self.now + limit
        self._settle()
        while self.state.active and self.now < end:
            wake = self.state.next_wakeup(self.now)
            ev = self.executor.next_time()
            nxt = min((t for t in (wake, ev) if t is not None), default=None)
            if nxt is None or nxt > end:
                break
            self.clock.set(max(nxt, self.now))
            self._settle()

    def _settle(self) -> None:
        now = self.now
        for _ in range(MAX_TICKS_PER_INSTANT):
            for event in self.executor.pop_due(now):
                self.state.observe(event, now)
            decisions = plan_tick(self.state, now)
            self.ticks += 1
            if not decisions:
                if self.executor.next_time() is not None and self.executor.next_time() <= now:  # type: ignore[operator]
                    continue
                return
            self.state.apply(decisions, now)
            for d in decisions:
                self.executor.handle(d, self.state, now)
            if self.keep_log:
                self.log.extend((now, d) for d in decisions)
            if self.observer is not None:
                self.observer(self, decisions)
        raise RuntimeError(f"the scheduler did not settle at t={now}")

    # -- readouts ---------------------------------------------------------------------------

    def run(self, name: str) -> RunRecord:
        return self.state.runs[name]

    def worker(self, name: str) -> WorkerRecord:
        return self.state.workers[name]

    def workers(self, run: str) -> list[WorkerRecord]:
        return self.state.workers_of(run)

    def task_counts(self, run: str) -> dict[str, int]:
        return self.state.task_counts(run)
