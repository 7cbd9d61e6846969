"""The embedded control plane's scheduler: pure decisions from state, time and inventory.

Owns: the run and worker states and their reasons in words, the records the scheduler reads
(``RunRecord``, ``WorkerRecord``: the rows a sqlmodel store keeps), the decisions it returns, the
observations an executor reports, placement (shapes over the network levels), start policies,
restarts and backoff, arrays, priorities, preemption and backfill, and each worker's environment.

Must not touch: clocks (``now`` is an argument), I/O, randomness, processes, the store. ``plan_tick``
and ``schedule`` only read; ``ClusterState.apply`` / ``observe`` are the one place records change,
written so a store can do the same with rows (the simulation and, later, the store call them).

One tick::

    observations ──observe──▶ ClusterState ──plan_tick(state, now)──▶ [Decision] ──apply──▶ ClusterState
                                                                          │
                                                          executor: PlaceWorker → prepare,
                                                          StartWorker → run, StopWorker → kill

A driver calls ``plan_tick`` until it returns nothing (each tick may enable the next at the same
``now``), then sleeps (or, simulated, jumps) to ``state.next_wakeup(now)`` or the next observation.

Decisions (closed set, ``Decision``):

================  ==========================================================================
AdmitRun          first look at a run: its start policy, on_failure, and the workers known now
MarkRun           set a run's state and reason
RestartRun        a job-level restart: the run waits until ``at`` (its workers are requeued)
PlaceWorker       put a worker on a machine with GPUs, cores and memory (creates it if new)
StartWorker       release a prepared worker (a gang: all together, behind the barrier)
StopWorker        kill a worker and free its place; it becomes ``state`` (Pending = requeued)
RequeueWorker     an ended worker goes back to the queue, not before ``at``
MarkWorker        set a pending or ended worker's state and reason; ``final`` = never restarted
================  ==========================================================================

Seed decisions where the seeds leave room (also in the tests' names):

* Shape: workers of a run without ``machines`` are created when it is first placed (the shape is
  chosen then, against the room there is); later restarts keep that shape.
* Barrier: a gang placed whole waits at most 15 minutes for every worker to be ready. When time is
  up, every worker is stopped and the gang restarts as a whole under its restart policy (counting
  one job-level restart, with the usual backoff); with ``Never`` or ``FailJob`` the run fails.
* Restarts: the count is per worker (per run for job-level restarts); a worker that has run 10
  minutes starts again from zero. Completions under ``Always`` and Service restarts wait 10 s and
  spend no budget; a Service's failures back off like OnFailure but have no limit.
* A worker failing for good fails a non-array run at once and stops its other workers. An array
  keeps going and is Failed, with the seeds' ``K of N`` reason, once every copy has ended.
* Time limit: the worker is Failed (``Stopped at its time limit of 1h``), never restarted.
* Backfill: runs are served by priority, then submission. After the first run blocked for room,
  a later run may start only if every worker states a time limit and it would end before the
  blocked run could start (its start estimated from the running workers' time limits).
* Preemption: only of strictly lower priority; a preempted worker goes back to the queue with its
  restart count untouched (a gang's or RestartJob run's other workers go back with it).
* Gangs with ``task_groups`` place and start every group together; ``start_after`` orders groups
  of non-gang runs only.
* Array copies get no MASTER_ADDR: they are independent.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from reconciler.runspec import messages as msg
from reconciler.runspec.messages import GANG_BARRIER_SECONDS, MASTER_PORT, RESTART_LIMIT
from reconciler.runspec.models import (
    OnFailure,
    Run,
    StartPolicy,
    TaskTemplate,
    resolve_on_failure,
    resolve_start,
)
from reconciler.runspec.quantities import format_duration
from reconciler.runspec.vocabulary import (
    BACKOFF_MAX_SECONDS,
    BACKOFF_START_SECONDS,
    CANCELLED_BY_USER,
    CONTAINER_RUNNING,
    FINAL_RUN_STATES,
    QUEUED,
    RESET_AFTER_SECONDS,
    RunState,
    WorkerState,
    array_cap,
    backoff_seconds,
    exited,
    readout,
)

from .inventory import Inventory, Machine

__all__ = [
    "BACKOFF_MAX_SECONDS",
    "BACKOFF_START_SECONDS",
    "HOLDING",
    "QUEUED",
    "RESET_AFTER_SECONDS",
    "RUN_DONE",
    "AdmitRun",
    "Ask",
    "CancelRun",
    "ClusterState",
    "Decision",
    "MachineBack",
    "MachineLost",
    "MachineUnreachable",
    "MarkRun",
    "MarkWorker",
    "NewWorker",
    "Observation",
    "PlaceWorker",
    "RequeueWorker",
    "RestartRun",
    "RunRecord",
    "RunState",
    "StartWorker",
    "StopCause",
    "StopWorker",
    "WorkerExited",
    "WorkerReady",
    "WorkerRecord",
    "WorkerState",
    "backoff_seconds",
    "plan_tick",
    "schedule",
    "worker_env",
]

INF = math.inf


# ---- states and reasons ----------------------------------------------------------------------


class StopCause(StrEnum):
    TIME_LIMIT = "TimeLimit"
    PREEMPTED = "Preempted"
    RUN_FAILED = "RunFailed"
    RUN_RESTART = "RunRestart"
    BARRIER = "Barrier"
    CANCELLED = "Cancelled"


RUN_DONE = FINAL_RUN_STATES
HOLDING = frozenset({WorkerState.PREPARING, WorkerState.READY, WorkerState.RUNNING, WorkerState.STALE})
ENDED = frozenset({WorkerState.COMPLETED, WorkerState.FAILED, WorkerState.STOPPED, WorkerState.DOWN})


# ---- what one worker needs -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ask:
    """What one worker needs on its machine; cores and memory may follow its GPUs."""

    gpus: int = 0
    cpu_cores: int = 0
    memory_bytes: int = 0
    cpu_per_gpu: int = 0
    memory_per_gpu: int = 0
    models: frozenset[str] | None = None
    min_memory_gb: float | None = None
    healthy_only: bool = False

    def cores(self, gpus: int) -> int:
        return self.cpu_cores + self.cpu_per_gpu * gpus

    def memory(self, gpus: int) -> int:
        return self.memory_bytes + self.memory_per_gpu * gpus

    def with_gpus(self, gpus: int) -> Ask:
        return Ask(
            gpus,
            self.cpu_cores,
            self.memory_bytes,
            self.cpu_per_gpu,
            self.memory_per_gpu,
            self.models,
            self.min_memory_gb,
            self.healthy_only,
        )

    def eligible(self, m: Machine) -> bool:
        if self.gpus and self.models is not None and m.gpu_model not in self.models:
            return False
        return not (self.gpus and self.min_memory_gb is not None and m.gpu_memory_gb < self.min_memory_gb)


def ask_of(template: TaskTemplate, gpus: int | None = None) -> Ask:
    """A worker's ask from its template; ``gpus`` overrides the count (a share of a shape)."""
    res = template.requested_resources
    if res is None:
        return Ask(cpu_cores=1)
    gr, per = res.gpu_requests, res.per_gpu
    count = (gr.count if gr else 0) if gpus is None else gpus
    cpu_per = (per.cpu_cores or 0) if per else 0
    mem_per = (per.memory_bytes or 0) if per else 0
    return Ask(
        gpus=count,
        cpu_cores=res.cpu_cores or (0 if cpu_per else 1),
        memory_bytes=res.memory_bytes or 0,
        cpu_per_gpu=cpu_per,
        memory_per_gpu=mem_per,
        models=frozenset(gr.models) if gr and gr.models else None,
        min_memory_gb=gr.min_memory_gb if gr else None,
        healthy_only=bool(gr and gr.healthy_only),
    )


# ---- records (a store's rows) ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NewWorker:
    """A worker as created: its name, rank, group, the run's size and its ask."""

    name: str
    run: str
    rank: int
    world_size: int
    ask: Ask
    group: str | None = None
    group_rank: int | None = None


@dataclass(slots=True, eq=False)
class WorkerRecord:
    name: str
    run: str
    rank: int
    world_size: int
    ask: Ask
    group: str | None = None
    group_rank: int | None = None
    state: WorkerState = WorkerState.PENDING
    reason: str = QUEUED
    machine: str | None = None
    gpus: int = 0
    unhealthy_gpus: int = 0
    cpu_cores: int = 0
    memory_bytes: int = 0
    #: Restarts spent from the budget (reset after 10 minutes of running).
    restarts: int = 0
    #: Every time the worker is started, preempted or not; for display.
    attempts: int = 0
    not_before: float | None = None
    placed_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    #: Ended for good: the scheduler will not restart it.
    final: bool = False
    #: An end the scheduler has not decided about yet.
    settled: bool = True


@dataclass(slots=True, eq=False)
class RunRecord:
    name: str
    run: Run
    seq: int
    submitted_at: float
    state: RunState = RunState.PENDING
    reason: str = QUEUED
    admitted: bool = False
    start: StartPolicy = "Independent"
    on_failure: OnFailure = "RestartTask"
    #: Job-level restarts spent (RestartJob, a lost gang leader, a gang's barrier).
    restarts: int = 0
    not_before: float | None = None
    placed_at: float | None = None
    running_since: float | None = None
    cancel_requested: bool = False
    first_failure: str | None = None

    @property
    def priority(self) -> int:
        return self.run.spec.priority or 0

    @property
    def is_array(self) -> bool:
        return self.run.spec.array is not None

    @property
    def service(self) -> bool:
        return self.run.spec.lifetime == "Service"


# ---- decisions ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AdmitRun:
    run: str
    start: StartPolicy
    on_failure: OnFailure
    workers: tuple[NewWorker, ...] = ()


@dataclass(frozen=True, slots=True)
class MarkRun:
    run: str
    state: RunState
    reason: str


@dataclass(frozen=True, slots=True)
class RestartRun:
    run: str
    at: float
    restarts: int
    reason: str


@dataclass(frozen=True, slots=True)
class PlaceWorker:
    worker: str
    machine: str
    gpus: int
    unhealthy_gpus: int
    cpu_cores: int
    memory_bytes: int
    #: Set when the worker is created by this placement (a shape chosen now).
    new: NewWorker | None = None


@dataclass(frozen=True, slots=True)
class StartWorker:
    worker: str


@dataclass(frozen=True, slots=True)
class StopWorker:
    worker: str
    cause: StopCause
    state: WorkerState
    reason: str
    not_before: float | None = None


@dataclass(frozen=True, slots=True)
class RequeueWorker:
    worker: str
    at: float
    restarts: int
    reason: str


@dataclass(frozen=True, slots=True)
class MarkWorker:
    worker: str
    state: WorkerState
    reason: str
    final: bool = False


Decision = (
    AdmitRun | MarkRun | RestartRun | PlaceWorker | StartWorker | StopWorker | RequeueWorker | MarkWorker
)


# ---- observations (what an executor or a user reports) -------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkerReady:
    worker: str


@dataclass(frozen=True, slots=True)
class WorkerExited:
    worker: str
    exit_code: int


@dataclass(frozen=True, slots=True)
class MachineUnreachable:
    machine: str


@dataclass(frozen=True, slots=True)
class MachineLost:
    machine: str


@dataclass(frozen=True, slots=True)
class MachineBack:
    machine: str


@dataclass(frozen=True, slots=True)
class CancelRun:
    run: str


Observation = WorkerReady | WorkerExited | MachineUnreachable | MachineLost | MachineBack | CancelRun


# ---- the state the scheduler reads --------------------------------------------------------------


@dataclass(eq=False)
class ClusterState:
    """Runs, workers and free capacity, with the indexes that keep a tick cheap.

    Only ``submit``, ``observe`` and ``apply`` change it; ``plan_tick`` reads it.
    """

    inventory: Inventory
    runs: dict[str, RunRecord] = field(default_factory=dict)
    workers: dict[str, WorkerRecord] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.machines = {m.name: m for m in self.inventory}
        self.max_gpus = self.inventory.largest_gpus
        # free[name] = [healthy GPUs, other GPUs, cores, memory]
        self.free: dict[str, list[int]] = {
            m.name: [m.healthy, m.gpus - m.healthy, m.cpu_cores, m.memory_bytes] for m in self.inventory
        }
        self.buckets: list[dict[str, None]] = [{} for _ in range(self.max_gpus + 1)]
        for m in self.inventory:
            self.buckets[m.gpus][m.name] = None
        self.down: set[str] = set()
        self.on_machine: dict[str, dict[str, None]] = {m.name: {} for m in self.inventory}
        self.run_workers: dict[str, list[str]] = {}
        self.pending: dict[str, dict[str, None]] = {}
        self.counts: dict[str, Counter[WorkerState]] = {}
        self.final_counts: dict[str, list[int]] = {}  # [ended for good, failed for good]
        self.active: dict[str, None] = {}
        self.unsettled: dict[str, None] = {}
        self.ready: dict[str, dict[str, None]] = {}
        self.holding_priorities: Counter[int] = Counter()
        self.timers: list[tuple[float, int, str, str]] = []
        self._seq = 0
        self._timer_seq = 0
        runs, workers = self.runs, self.workers
        self.runs, self.workers = {}, {}
        for r in sorted(runs.values(), key=lambda r: r.seq):
            self._add_run(r)
        for w in sorted(workers.values(), key=lambda w: (w.run, w.rank)):
            self._add_worker(w)

    # -- building ----------------------------------------------------------------------------

    def _add_run(self, r: RunRecord) -> None:
        self.runs[r.name] = r
        self._seq = max(self._seq, r.seq + 1)
        self.run_workers.setdefault(r.name, [])
        self.pending.setdefault(r.name, {})
        self.counts.setdefault(r.name, Counter())
        self.final_counts.setdefault(r.name, [0, 0])
        self.ready.setdefault(r.name, {})
        if r.state not in RUN_DONE:
            self.active[r.name] = None
        if r.not_before is not None:
            self._timer(r.not_before, "run", r.name)
        if r.placed_at is not None and r.start == "Gang":
            self._timer(r.placed_at + GANG_BARRIER_SECONDS, "barrier", r.name)

    def _add_worker(self, w: WorkerRecord) -> None:
        self.workers[w.name] = w
        self.run_workers[w.run].append(w.name)
        self.counts[w.run][w.state] += 1
        if w.state is WorkerState.PENDING:
            self.pending[w.run][w.name] = None
            if w.not_before is not None:
                self._timer(w.not_before, "worker", w.name)
        if w.state in HOLDING and w.machine is not None:
            self._take(w.machine, w.gpus - w.unhealthy_gpus, w.unhealthy_gpus, w.cpu_cores, w.memory_bytes)
            self.on_machine[w.machine][w.name] = None
            self.holding_priorities[self.runs[w.run].priority] += 1
        if w.state is WorkerState.READY:
            self.ready[w.run][w.name] = None
        if w.state is WorkerState.RUNNING:
            self._deadline(w)
        if w.final:
            self._count_final(w)
        if not w.settled:
            self.unsettled[w.name] = None

    def replace_spec(self, name: str, run: Run) -> None:
        """A run's spec replaced in place (the API's PUT). Of the indexes, only the priorities of
        the workers holding machines are read from a spec: those move with it."""
        r = self.runs[name]
        held = sum(
            1 for w in self.run_workers[name] if w in self.on_machine.get(self.workers[w].machine or "", ())
        )
        if held:
            self.holding_priorities[r.priority] -= held
            if self.holding_priorities[r.priority] <= 0:
                del self.holding_priorities[r.priority]
        r.run = run
        if held:
            self.holding_priorities[r.priority] += held

    def submit(self, run: Run, now: float) -> RunRecord:
        """Queue a new run (the API's POST /runs); the next tick admits it."""
        name = run.metadata.name
        if name in self.runs:
            raise ValueError(f"run {name} exists")
        record = RunRecord(name=name, run=run, seq=self._seq, submitted_at=now)
        self._add_run(record)
        return record

    # -- capacity ----------------------------------------------------------------------------

    def _rebucket(self, name: str, before: int) -> None:
        f = self.free[name]
        after = f[0] + f[1]
        if name in self.down:
            self.buckets[before].pop(name, None)
            return
        if after != before or name not in self.buckets[after]:
            self.buckets[before].pop(name, None)
            self.buckets[after][name] = None

    def _take(self, name: str, gh: int, gu: int, cores: int, mem: int) -> None:
        f = self.free[name]
        before = f[0] + f[1]
        f[0] -= gh
        f[1] -= gu
        f[2] -= cores
        f[3] -= mem
        self._rebucket(name, before)

    def _give(self, name: str, gh: int, gu: int, cores: int, mem: int) -> None:
        self._take(name, -gh, -gu, -cores, -mem)

    # -- timers ------------------------------------------------------------------------------

    def _timer(self, at: float, kind: str, name: str) -> None:
        self._timer_seq += 1
        heapq.heappush(self.timers, (at, self._timer_seq, kind, name))

    def _deadline(self, w: WorkerRecord) -> None:
        limit = self.template(w).time_limit_seconds
        if limit is not None and w.started_at is not None:
            self._timer(w.started_at + limit, "deadline", w.name)

    def next_wakeup(self, now: float) -> float | None:
        """The next time a tick has something to do, with no observation; ``None``: never."""
        while self.timers and self.timers[0][0] <= now:
            heapq.heappop(self.timers)
        return self.timers[0][0] if self.timers else None

    def due(self, now: float, kind: str) -> Iterator[str]:
        """Names of timers of ``kind`` due at ``now`` (reads the heap, changes nothing)."""
        heap, stack = self.timers, [0]
        while stack:
            i = stack.pop()
            if i < len(heap) and heap[i][0] <= now:
                if heap[i][2] == kind:
                    yield heap[i][3]
                stack.extend((2 * i + 1, 2 * i + 2))

    # -- lookups -----------------------------------------------------------------------------

    def template(self, w: WorkerRecord) -> TaskTemplate:
        spec = self.runs[w.run].run.spec
        if w.group is not None and spec.task_groups:
            for g in spec.task_groups:
                if g.name == w.group:
                    return g.task_template
        assert spec.task_template is not None
        return spec.task_template

    def workers_of(self, run: str) -> list[WorkerRecord]:
        return [self.workers[n] for n in self.run_workers.get(run, ())]

    def task_counts(self, run: str) -> dict[str, int]:
        """``{"Completed": 41, "Pending": 51, "Running": 8}``: the API's readout, sorted."""
        return {str(k): v for k, v in sorted(self.counts[run].items()) if v}

    def holding(self, run: str) -> int:
        c = self.counts[run]
        return sum(c[s] for s in HOLDING)

    # -- changing records --------------------------------------------------------------------

    def _set_state(self, w: WorkerRecord, state: WorkerState, reason: str) -> None:
        old = w.state
        run = self.runs[w.run]
        if old is not state:
            c = self.counts[w.run]
            c[old] -= 1
            c[state] += 1
            if old is WorkerState.PENDING:
                self.pending[w.run].pop(w.name, None)
            if state is WorkerState.PENDING:
                self.pending[w.run][w.name] = None
            if old is WorkerState.READY:
                self.ready[w.run].pop(w.name, None)
            if state is WorkerState.READY:
                self.ready[w.run][w.name] = None
            if old in HOLDING and state not in HOLDING:
                self._release(w, run)
        w.state = state
        w.reason = reason

    def _release(self, w: WorkerRecord, run: RunRecord) -> None:
        if w.machine is not None:
            self.on_machine[w.machine].pop(w.name, None)
            self._give(w.machine, w.gpus - w.unhealthy_gpus, w.unhealthy_gpus, w.cpu_cores, w.memory_bytes)
            self.holding_priorities[run.priority] -= 1
            if self.holding_priorities[run.priority] <= 0:
                del self.holding_priorities[run.priority]
        if self.holding(w.run) == 0:
            run.placed_at = None

    def _count_final(self, w: WorkerRecord) -> None:
        fc = self.final_counts[w.run]
        fc[0] += 1
        if w.state is not WorkerState.COMPLETED:
            fc[1] += 1
            run = self.runs[w.run]
            if run.first_failure is None:
                run.first_failure = msg.WORKER_FAILED_ON.format(
                    worker=w.name, machine=w.machine or "-", reason=w.reason
                )

    def _end(self, w: WorkerRecord, state: WorkerState, reason: str, now: float) -> None:
        self._set_state(w, state, reason)
        w.ended_at = now
        w.settled = False
        self.unsettled[w.name] = None

    def observe(self, event: Observation, now: float) -> None:
        """Record what an executor (or a user) reports."""
        if isinstance(event, WorkerReady):
            w = self.workers.get(event.worker)
            if w is not None and w.state is WorkerState.PREPARING:
                self._set_state(w, WorkerState.READY, "Prepared; waiting to start")
        elif isinstance(event, WorkerExited):
            w = self.workers.get(event.worker)
            if w is not None and w.state in (WorkerState.RUNNING, WorkerState.STALE):
                w.exit_code = event.exit_code
                state = WorkerState.COMPLETED if event.exit_code == 0 else WorkerState.FAILED
                self._end(w, state, exited(event.exit_code), now)
        elif isinstance(event, MachineUnreachable):
            for name in list(self.on_machine[event.machine]):
                w = self.workers[name]
                self._set_state(w, WorkerState.STALE, f"Machine {event.machine} stopped reporting")
        elif isinstance(event, MachineLost):
            for name in list(self.on_machine[event.machine]):
                self._end(self.workers[name], WorkerState.DOWN, f"Machine {event.machine} was lost", now)
            f = self.free[event.machine]
            self.buckets[f[0] + f[1]].pop(event.machine, None)
            self.down.add(event.machine)
        elif isinstance(event, MachineBack):
            if event.machine in self.down:
                self.down.discard(event.machine)
                f = self.free[event.machine]
                self.buckets[f[0] + f[1]][event.machine] = None
        elif isinstance(event, CancelRun):
            run = self.runs.get(event.run)
            if run is not None and run.state not in RUN_DONE:
                run.cancel_requested = True
        else:  # pragma: no cover - closed union
            raise TypeError(event)

    def apply(self, decisions: Iterable[Decision], now: float) -> None:
        """Carry decisions into the records (what the store does with rows)."""
        for d in decisions:
            if isinstance(d, PlaceWorker):
                if d.new is not None and d.new.name not in self.workers:
                    n = d.new
                    self._add_worker(
                        WorkerRecord(n.name, n.run, n.rank, n.world_size, n.ask, n.group, n.group_rank)
                    )
                w = self.workers[d.worker]
                run = self.runs[w.run]
                if self.holding(w.run) == 0:
                    run.placed_at = now
                    if run.start == "Gang":
                        self._timer(now + GANG_BARRIER_SECONDS, "barrier", run.name)
                self._set_state(w, WorkerState.PREPARING, f"Preparing on {d.machine}")
                w.machine, w.gpus, w.unhealthy_gpus = d.machine, d.gpus, d.unhealthy_gpus
                w.cpu_cores, w.memory_bytes = d.cpu_cores, d.memory_bytes
                w.placed_at, w.started_at, w.ended_at, w.exit_code = now, None, None, None
                w.not_before = None
                self._take(
                    d.machine, d.gpus - d.unhealthy_gpus, d.unhealthy_gpus, d.cpu_cores, d.memory_bytes
                )
                self.on_machine[d.machine][w.name] = None
                self.holding_priorities[run.priority] += 1
            elif isinstance(d, StartWorker):
                w = self.workers[d.worker]
                self._set_state(w, WorkerState.RUNNING, CONTAINER_RUNNING)
                w.started_at = now
                w.attempts += 1
                self._deadline(w)
                run = self.runs[w.run]
                if run.running_since is None:
                    run.running_since = now
            elif isinstance(d, StopWorker):
                w = self.workers[d.worker]
                self._set_state(w, d.state, d.reason)
                w.ended_at = now
                if d.state is WorkerState.PENDING:
                    w.not_before = d.not_before
                    if d.not_before is not None:
                        self._timer(d.not_before, "worker", w.name)
                elif not w.final:
                    w.final = True
                    w.settled = True
                    self.unsettled.pop(w.name, None)
                    self._count_final(w)
            elif isinstance(d, RequeueWorker):
                w = self.workers[d.worker]
                was_final = w.final
                self._set_state(w, WorkerState.PENDING, d.reason)
                w.not_before, w.restarts, w.settled, w.final = d.at, d.restarts, True, False
                if was_final:
                    fc = self.final_counts[w.run]
                    fc[0] -= 1
                    if w.exit_code != 0:
                        fc[1] -= 1
                self.unsettled.pop(w.name, None)
                self._timer(d.at, "worker", w.name)
            elif isinstance(d, MarkWorker):
                w = self.workers[d.worker]
                self._set_state(w, d.state, d.reason)
                if d.final and not w.final:
                    w.final = True
                    self._count_final(w)
                if d.state in ENDED:
                    w.settled = True
                    self.unsettled.pop(w.name, None)
            elif isinstance(d, MarkRun):
                run = self.runs[d.run]
                run.state, run.reason = d.state, d.reason
                if d.state in RUN_DONE:
                    self.active.pop(d.run, None)
                if d.state is not RunState.RUNNING:
                    run.running_since = None
            elif isinstance(d, RestartRun):
                run = self.runs[d.run]
                run.state, run.reason = RunState.PENDING, d.reason
                run.restarts, run.not_before, run.running_since = d.restarts, d.at, None
                self._timer(d.at, "run", d.run)
            elif isinstance(d, AdmitRun):
                run = self.runs[d.run]
                run.admitted, run.start, run.on_failure = True, d.start, d.on_failure
                for n in d.workers:
                    self._add_worker(
                        WorkerRecord(n.name, n.run, n.rank, n.world_size, n.ask, n.group, n.group_rank)
                    )
            else:  # pragma: no cover - closed union
                raise TypeError(d)


# ---- placement ---------------------------------------------------------------------------------

# Network levels, fastest first: (name, the machine attribute grouping it).
LEVELS: tuple[tuple[str, str | None], ...] = (
    ("machine", None),
    ("nvlink", "nvlink_domain"),
    ("infiniband", "fabric"),
    ("rdma", "rdma_network"),
    ("rack", "rack"),
    ("ethernet", None),
)
SLOWEST_LEVEL = {"nvlink": 1, "infiniband": 2, "rdma": 3, "ethernet": 5}
KEEP_ATTR = {"nvlink_domain": "nvlink_domain", "fabric": "fabric", "rack": "rack"}
KEEP_LEVEL = {"nvlink_domain": 1, "fabric": 2, "rack": 5}


class _View:
    """Free capacity as the tick sees it: the state's, with this tick's changes laid over.

    ``version`` counts its changes (``take`` and ``give``), ``gives`` only the ones that free
    room: a placement that failed stays failed while ``gives`` has not moved (see ``_Memo``).
    """

    __slots__ = ("_totals", "empty", "gives", "over", "s", "version")

    def __init__(self, state: ClusterState, empty: bool = False) -> None:
        self.s, self.over, self.empty = state, {}, empty
        self.version = self.gives = 0
        self._totals: list[int] | None = None

    def free_gpus(self, healthy_only: bool) -> int:
        """Free GPUs on every usable machine (healthy ones only, or all): a bound on any placement."""
        if self._totals is None:
            t = [0, 0]
            for name in self.s.machines:
                if self.usable(name):
                    f = self.free(name)
                    t[0] += f[0]
                    t[1] += f[1]
            self._totals = t
        t = self._totals
        return t[0] if healthy_only else t[0] + t[1]

    def _count(self, name: str, gh: int, gu: int) -> None:
        self.version += 1
        if self._totals is not None and self.usable(name):
            self._totals[0] += gh
            self._totals[1] += gu

    def free(self, name: str) -> list[int]:
        f = self.over.get(name)
        if f is not None:
            return f
        if self.empty:
            m = self.s.machines[name]
            return [m.healthy, m.gpus - m.healthy, m.cpu_cores, m.memory_bytes]
        return self.s.free[name]

    def usable(self, name: str) -> bool:
        return self.empty or name not in self.s.down

    def cap(self, m: Machine, ask: Ask) -> int:
        """The most GPUs of this ask that fit on ``m`` now."""
        if not self.usable(m.name) or not ask.eligible(m):
            return 0
        fh, fu, cores, mem = self.free(m.name)
        g = fh if ask.healthy_only else fh + fu
        cores -= ask.cpu_cores
        mem -= ask.memory_bytes
        if cores < 0 or mem < 0:
            return 0
        if ask.cpu_per_gpu:
            g = min(g, cores // ask.cpu_per_gpu)
        if ask.memory_per_gpu:
            g = min(g, mem // ask.memory_per_gpu)
        return max(g, 0)

    def fits(self, m: Machine, ask: Ask, gpus: int) -> bool:
        if not self.usable(m.name) or not ask.eligible(m):
            return False
        fh, fu, cores, mem = self.free(m.name)
        g = fh if ask.healthy_only else fh + fu
        return g >= gpus and cores >= ask.cores(gpus) and mem >= ask.memory(gpus)

    def take(self, name: str, ask: Ask, gpus: int) -> tuple[int, int, int, int]:
        f = list(self.free(name))
        gu = 0 if ask.healthy_only else min(f[1], gpus)
        gh = gpus - gu
        cores, mem = ask.cores(gpus), ask.memory(gpus)
        f[0] -= gh
        f[1] -= gu
        f[2] -= cores
        f[3] -= mem
        self.over[name] = f
        self._count(name, -gh, -gu)
        return gu, cores, mem, gh

    def give(self, w: WorkerRecord) -> None:
        assert w.machine is not None
        f = list(self.free(w.machine))
        f[0] += w.gpus - w.unhealthy_gpus
        f[1] += w.unhealthy_gpus
        f[2] += w.cpu_cores
        f[3] += w.memory_bytes
        self.over[w.machine] = f
        self.gives += 1
        self._count(w.machine, w.gpus - w.unhealthy_gpus, w.unhealthy_gpus)

    def candidates(self, gpus: int) -> Iterator[Machine]:
        """Machines with at least ``gpus`` free GPUs, fullest first (best fit)."""
        s = self.s
        if self.empty:
            yield from s.inventory
            return
        for g in range(min(gpus, s.max_gpus + 1), s.max_gpus + 1):
            for name in list(s.buckets[g]):
                yield s.machines[name]
        # machines this tick freed (preemption) may sit in lower buckets than their room
        for name in list(self.over):
            if sum(self.over[name][:2]) > sum(s.free[name][:2]):
                yield s.machines[name]


@dataclass(frozen=True, slots=True)
class _Net:
    """The network constraints of a run: the slowest level allowed and a grouping to keep within."""

    slowest: int = 5
    keep: str | None = None

    @staticmethod
    def of(run: Run) -> _Net:
        spec = run.spec
        slowest, keep = 5, None
        if spec.network and spec.network.interconnect:
            slowest = SLOWEST_LEVEL[spec.network.interconnect]
        if spec.topology and spec.topology.keep_within:
            keep = KEEP_ATTR[spec.topology.keep_within]
            slowest = min(slowest, KEEP_LEVEL[spec.topology.keep_within])
        return _Net(slowest, keep)

    def groups(self, machines: Iterable[Machine]) -> Iterator[tuple[str, list[Machine]]]:
        """Groups of machines for each allowed level, fastest level first."""
        ms = list(machines)
        for level, (name, attr) in enumerate(LEVELS):
            if level > self.slowest or level == 0:
                continue
            out: dict[tuple, list[Machine]] = {}
            for m in ms:
                key = getattr(m, attr) if attr else ""
                if key is None:
                    continue
                kk = getattr(m, self.keep) if self.keep else ""
                if kk is None:
                    continue
                out.setdefault((key, kk), []).append(m)
            for group in out.values():
                yield name, group

    def same_group(self, a: Machine, b: Machine) -> bool:
        attr = LEVELS[self.slowest][1] if self.slowest < 5 else None
        if attr and getattr(a, attr) != getattr(b, attr):
            return False
        return not (self.keep and getattr(a, self.keep) != getattr(b, self.keep))


def _shape(
    view: _View, ask: Ask, count: int, k_min: int, net: _Net, memo: _Memo | None = None
) -> list[tuple[Machine, int]] | None:
    """The fewest machines on the best network with room for ``count`` GPUs; one worker each.

    One machine if any can hold it all (the fullest that can); else, at the fastest network level
    where a group can, the group needing the fewest machines and leaving the least room unused.
    ``memo`` (a tick's) keeps the grouping of machines between calls; the answer is the same.
    """
    best = None
    if count >= k_min:
        # only machines with ``count`` free GPUs can hold it: the buckets give them (or, on an
        # empty view, every machine); the fullest wins, so the order they come in does not matter
        ms = view.s.inventory if view.empty else view.candidates(count)
        for m in ms:
            if view.fits(m, ask, count):
                f = view.free(m.name)
                key = (f[0] + f[1], m.name)
                if best is None or key < best[0]:
                    best = (key, [(m, count)])
    if best:
        return best[1]
    groups = memo.groups(view, ask, net) if memo is not None else _groups(view, ask, net)
    level_found = None
    for level, group in groups:
        if level_found is not None and level != level_found:
            break
        caps = sorted(((view.cap(m, ask), m.name, m) for m in group), key=lambda c: (-c[0], c[1]))
        caps = [c for c in caps if c[0] >= k_min and c[0] > 0]
        total, k = 0, 0
        for c in caps:
            total += c[0]
            k += 1
            if total >= count:
                break
        if total < count or k * k_min > count:
            continue
        key = (k, sum(c for c, _, _ in caps[:k]) - count)
        if best is None or key < best[0]:
            best = (key, _split(caps, k, count, k_min))
            level_found = level
            if key == (2, 0):
                # no machine holds it alone (else it was chosen above), so nothing beats two
                # machines with no room left over: a later group would need a smaller key
                break
    return best[1] if best else None


def _groups(view: _View, ask: Ask, net: _Net) -> list[tuple[str, list[Machine]]]:
    """The groups of usable machines eligible for ``ask``, each allowed level, fastest first."""
    machines = [m for m in view.s.inventory if view.usable(m.name) and ask.eligible(m)]
    return list(net.groups(machines))


class _Memo:
    """What one tick learns once and reuses, none of it changing an answer.

    * the grouping of machines by network level, per eligibility and network constraint (the
      machines that are usable and eligible do not change within a tick);
    * admission's verdicts on an empty cluster (``_shape``), per ask and constraint;
    * the asks that found no room: a ``_shape`` that failed fails again while no room has been
      freed since (taking room only lowers every machine's capacity, and a shape that fits with
      less room fits with more); a ``_fixed`` that failed, while the view has not changed at all.
    """

    def __init__(self) -> None:
        self._groups: dict[tuple, list[tuple[str, list[Machine]]]] = {}
        self.empty_shapes: dict[tuple, bool] = {}
        self._no_room: dict[tuple, tuple[int, int]] = {}

    def groups(self, view: _View, ask: Ask, net: _Net) -> list[tuple[str, list[Machine]]]:
        key = (view.empty, bool(ask.gpus), ask.models, ask.min_memory_gb, net)
        got = self._groups.get(key)
        if got is None:
            got = self._groups[key] = _groups(view, ask, net)
        return got

    def shape(
        self, view: _View, ask: Ask, count: int, k_min: int, net: _Net
    ) -> list[tuple[Machine, int]] | None:
        """``_shape(view, ...)``, skipping one bound to fail: too few free GPUs, or failed already."""
        if count > view.free_gpus(ask.healthy_only):
            return None
        key = ("shape", ask, count, k_min, net)
        if self._no_room.get(key, (-1, -1))[0] == view.gives:
            return None
        got = _shape(view, ask, count, k_min, net, self)
        if got is None:
            self._no_room[key] = (view.gives, view.version)
        return got

    def fixed(self, view: _View, asks: list[tuple[str, Ask]], net: _Net, distinct: bool):
        """``_fixed(view, ...)``, skipping one bound to fail: too few free GPUs, or failed already."""
        need = sum(a.gpus for _, a in asks)
        if need > view.free_gpus(all(a.healthy_only for _, a in asks)):
            return None
        key = ("fixed", tuple(a for _, a in asks), net, distinct)
        if self._no_room.get(key, (-1, -1))[1] == view.version:
            return None
        got = _fixed(view, asks, net, distinct)
        if got is None:
            self._no_room[key] = (view.gives, view.version)
        return got


def _split(caps: list[tuple[int, str, Machine]], k: int, count: int, k_min: int) -> list[tuple[Machine, int]]:
    if count % k == 0:
        share = count // k
        fitting = [c for c in caps if c[0] >= share]
        if len(fitting) >= k:
            fitting.sort(key=lambda c: (c[0], c[1]))  # pack: the fullest machines that fit
            return sorted(((c[2], share) for c in fitting[:k]), key=lambda x: x[0].name)
    shares, rest, out = [], count - k * k_min, []
    for cap, _, m in caps[:k]:
        extra = min(cap - k_min, rest)
        rest -= extra
        shares.append((m, k_min + extra))
    out = shares
    return out


def _fixed(
    view: _View, asks: list[tuple[str, Ask]], net: _Net, distinct: bool, anchor: Machine | None = None
) -> list[tuple[str, Machine]] | None:
    """Machines for known workers placed together, every one on one network group."""
    s = view.s
    machines = [m for m in s.inventory if view.usable(m.name)]
    if anchor is not None:
        machines = [m for m in machines if net.same_group(m, anchor)]
    order = sorted(asks, key=lambda a: -a[1].gpus)

    def attempt(group: list[Machine]) -> list[tuple[str, Machine]] | None:
        trial = _View(s, view.empty)
        trial.over = dict(view.over)
        used: set[str] = set()
        out = []
        for name, ask in order:
            pick = None
            for m in group:
                if distinct and m.name in used:
                    continue
                if trial.fits(m, ask, ask.gpus):
                    f = trial.free(m.name)
                    key = (f[0] + f[1], m.name)
                    if pick is None or key < pick[0]:
                        pick = (key, m)
            if pick is None:
                return None
            trial.take(pick[1].name, ask, ask.gpus)
            used.add(pick[1].name)
            out.append((name, pick[1]))
        return out

    if len(asks) == 1 or (not distinct and net.slowest >= 5 and net.keep is None):
        got = attempt(machines)
        if got is not None or len(asks) == 1:
            return got
    for _, group in net.groups(machines):
        got = attempt(group)
        if got is not None:
            return got
    return None


def _place_decision(view: _View, w_name: str, m: Machine, ask: Ask, gpus: int, new=None) -> PlaceWorker:
    gu, cores, mem, _ = view.take(m.name, ask, gpus)
    return PlaceWorker(w_name, m.name, gpus, gu, cores, mem, new)


# ---- admission: policies, workers, and runs that can never fit ------------------------------------


def _templates(run: Run) -> list[TaskTemplate]:
    spec = run.spec
    if spec.task_groups:
        return [g.task_template for g in spec.task_groups]
    assert spec.task_template is not None
    return [spec.task_template]


def _admit(state: ClusterState, r: RunRecord, memo: _Memo | None = None) -> list[Decision]:
    spec = r.run.spec
    start = resolve_start(spec, state.max_gpus)
    on_failure = resolve_on_failure(spec, start)
    name = r.name
    workers: list[NewWorker] = []
    if spec.array is not None:
        assert spec.task_template is not None
        ask = ask_of(spec.task_template)
        size = spec.array.size
        workers = [NewWorker(f"{name}-{i}", name, i, size, ask) for i in range(size)]
    elif spec.task_groups:
        size = sum(g.replicas for g in spec.task_groups)
        rank = 0
        for g in spec.task_groups:
            ask = ask_of(g.task_template)
            for i in range(g.replicas):
                workers.append(NewWorker(f"{name}-{g.name}-{i}", name, rank, size, ask, g.name, i))
                rank += 1
    else:
        tt = spec.task_template
        assert tt is not None
        res = tt.requested_resources
        n = res.machines if res and res.machines else None
        if res is None or res.gpu_requests is None:
            n = n or 1
            workers = [NewWorker(f"{name}-{i}", name, i, n, ask_of(tt)) for i in range(n)]
        elif n is not None:
            share = res.gpu_requests.count // n
            workers = [NewWorker(f"{name}-{i}", name, i, n, ask_of(tt, share)) for i in range(n)]
    why = _never_fits(state, r, workers, start, memo)
    if why is not None:
        return [MarkRun(name, RunState.FAILED, why)]
    return [AdmitRun(name, start, on_failure, tuple(workers))]


def _label(ask: Ask) -> str:
    return f" with {'/'.join(sorted(ask.models))}" if ask.models else ""


def _never_fits(
    state: ClusterState, r: RunRecord, workers: list[NewWorker], start: str, memo: _Memo | None = None
) -> str | None:
    """Why no placement could ever satisfy the run (on an empty cluster), or ``None``."""
    inv = state.inventory
    spec = r.run.spec
    for tt in _templates(r.run):
        res = tt.requested_resources
        gr = res.gpu_requests if res else None
        if gr is None:
            continue
        ask = ask_of(tt)
        if gr.models:
            have = sorted({m.gpu_model for m in inv})
            if not any(m.gpu_model in gr.models for m in inv):
                return (
                    f"gpu_requests.models {', '.join(gr.models)} but no machine has those GPUs "
                    f"(the cluster has {', '.join(have)})"
                )
        ms = [m for m in inv if ask.eligible(m) or not (gr.models or gr.min_memory_gb)]
        if gr.min_memory_gb is not None:
            ms = [m for m in inv if ask.with_gpus(1).eligible(m)]
            if not ms:
                top = max(m.gpu_memory_gb for m in inv if not gr.models or m.gpu_model in gr.models)
                return (
                    f"gpu_requests.min_memory_gb {gr.min_memory_gb:g} but the largest GPU memory"
                    f"{_label(ask)} is {top:g} GB"
                )
        ms = [m for m in ms if ask.with_gpus(1).eligible(m)]
        health = " healthy" if ask.healthy_only else ""
        largest = max((m.healthy if ask.healthy_only else m.gpus) for m in ms)
        if gr.min_per_machine and largest < gr.min_per_machine:
            return (
                f"min_per_machine {gr.min_per_machine} but the largest machine{_label(ask)} "
                f"has {largest}{health} GPUs"
            )
        one_machine = spec.array is not None or spec.task_groups is not None
        if one_machine and largest < gr.count:
            what = "an array copy" if spec.array is not None else "a group's worker"
            return (
                f"gpu_requests.count {gr.count} but {what} runs on one machine and the largest "
                f"machine{_label(ask)} has {largest}{health} GPUs"
            )
        if res and res.machines:
            share = gr.count // res.machines
            able = sum(1 for m in ms if _View(state, True).fits(m, ask.with_gpus(share), share))
            if able < res.machines:
                return (
                    f"machines {res.machines} with {share} GPUs each but only {able} machines"
                    f"{_label(ask)} can hold {share}{health} GPUs with their cores and memory"
                )
    view = _View(state, empty=True)
    net = _Net.of(r.run)
    if workers:
        if spec.array is not None:
            return _one_by_one(view, workers[:1])  # copies are alike and placed one by one
        if start != "Gang":
            return _one_by_one(view, workers)
        if _fixed(view, [(w.name, w.ask) for w in workers], net, spec.task_groups is None) is not None:
            return None
    else:
        tt = spec.task_template
        assert tt is not None and tt.requested_resources and tt.requested_resources.gpu_requests
        gr = tt.requested_resources.gpu_requests
        ask = ask_of(tt)
        k_min = gr.min_per_machine or 1
        if memo is None:
            fits = _shape(view, ask, gr.count, k_min, net) is not None
        else:  # the empty cluster is the same all tick: one verdict per ask
            key = (ask, gr.count, k_min, net)
            fits = memo.empty_shapes.get(key)
            if fits is None:
                fits = memo.empty_shapes[key] = _shape(view, ask, gr.count, k_min, net, memo) is not None
        if fits:
            return None
        total = sum(view.cap(m, ask) for m in inv)
        if total < gr.count:
            return (
                f"gpu_requests.count {gr.count} but the machines{_label(ask)} can hold at most "
                f"{total} GPUs of this run with its cores and memory per GPU"
            )
        if spec.topology and spec.topology.keep_within:
            within = spec.topology.keep_within
            return f"topology.keep_within {within} but no {within} can hold {gr.count} GPUs"
        if spec.network and spec.network.interconnect:
            net_name = spec.network.interconnect
            return f"network.interconnect {net_name} but no {net_name} network can hold {gr.count} GPUs"
    return "no set of machines could ever hold this run together"


def _one_by_one(view: _View, workers: list[NewWorker]) -> str | None:
    for w in workers:
        if not any(view.fits(m, w.ask, w.ask.gpus) for m in view.s.inventory):
            g = w.ask.gpus
            return (
                f"worker {w.name} needs {g} GPUs, {w.ask.cores(g)} cores and "
                f"{w.ask.memory(g)} bytes of memory on one machine, more than any machine has"
            )
    return None


# ---- the tick ------------------------------------------------------------------------------------


class _Tick:
    def __init__(self, state: ClusterState, now: float) -> None:
        self.s, self.now = state, now
        self.out: list[Decision] = []
        self.touched: set[str] = set()
        self.view = _View(state)
        self.memo = _Memo()
        self.blocker: RunRecord | None = None
        self._shadow: float | None = None
        self.placed: set[tuple[str, str]] = set()
        #: Runs whose fate this tick decided as a whole (cancelled, failed, restarted): no more for them.
        self.frozen: set[str] = set()
        self.marked: set[str] = set()

    # -- helpers -----------------------------------------------------------------------------

    def emit(self, d: Decision, run: str) -> None:
        self.out.append(d)
        self.touched.add(run)
        if isinstance(d, PlaceWorker):
            self.placed.add((run, d.machine))
        elif isinstance(d, MarkRun):
            self.marked.add(run)

    def policy(self, w: WorkerRecord) -> str:
        return self.s.template(w).restart_policy

    def fail_run(self, r: RunRecord, reason: str, skip: str | None = None) -> None:
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

    def restart_run(self, r: RunRecord, why: str, cause: StopCause, failed: WorkerRecord | None) -> None:
        s, now = self.s, self.now
        self.frozen.add(r.name)
        ran = (now - r.running_since) if r.running_since is not None else 0
        n = (0 if ran >= RESET_AFTER_SECONDS else r.restarts) + 1
        if n > RESTART_LIMIT and not r.service:
            self.fail_run(r, f"{why}; no restarts left ({RESTART_LIMIT} used)")
            return
        at = now + backoff_seconds(n)
        for w in s.workers_of(r.name):
            if w is failed or (w.state in ENDED and not w.settled):
                self.emit(RequeueWorker(w.name, at, w.restarts, f"Restarting with the run: {why}"), r.name)
            elif w.state in HOLDING:
                self.emit(
                    StopWorker(w.name, cause, WorkerState.PENDING, f"Restarting with the run: {why}", at),
                    r.name,
                )
            elif w.state in ENDED:
                self.emit(RequeueWorker(w.name, at, w.restarts, f"Restarting with the run: {why}"), r.name)
        limit = "" if r.service else f" of {RESTART_LIMIT}"
        self.emit(RestartRun(r.name, at, n, f"{why}; restart {n}{limit} in {backoff_seconds(n)} s"), r.name)

    # -- phases ------------------------------------------------------------------------------

    def cancellations(self) -> None:
        for name in list(self.s.active):
            r = self.s.runs[name]
            if not r.cancel_requested:
                continue
            for w in self.s.workers_of(name):
                if w.state in HOLDING:
                    self.emit(
                        StopWorker(w.name, StopCause.CANCELLED, WorkerState.STOPPED, CANCELLED_BY_USER), name
                    )
                elif w.state is WorkerState.PENDING or (w.state in ENDED and not w.settled):
                    self.emit(MarkWorker(w.name, WorkerState.STOPPED, CANCELLED_BY_USER, final=True), name)
            self.emit(MarkRun(name, RunState.CANCELLED, CANCELLED_BY_USER), name)
            self.frozen.add(name)

    def settle(self) -> None:
        s = self.s
        for wname in list(s.unsettled):
            w = s.workers[wname]
            r = s.runs[w.run]
            if r.name in self.frozen:
                continue
            if r.state in RUN_DONE:
                self.emit(MarkWorker(w.name, w.state, w.reason, final=True), r.name)
                continue
            completed = w.state is WorkerState.COMPLETED
            policy = self.policy(w)
            if completed and not r.service and policy != "Always":
                self.emit(MarkWorker(w.name, w.state, w.reason, final=True), r.name)
                continue
            if completed:
                at = self.now + BACKOFF_START_SECONDS
                why = "it is a Service" if r.service else "restart_policy Always"
                self.emit(
                    RequeueWorker(w.name, at, w.restarts, f"{w.reason}; restarting in 10 s ({why})"), r.name
                )
                continue
            where = f"Worker {w.name} failed on {w.machine or '-'}: {w.reason}"
            if r.on_failure == "FailJob" and not r.service:
                self.emit(MarkWorker(w.name, w.state, w.reason, final=True), r.name)
                self.fail_run(r, where, skip=w.name)
                continue
            if policy == "Never" and not r.service:
                self.emit(MarkWorker(w.name, w.state, w.reason, final=True), r.name)
                if not r.is_array:
                    self.fail_run(r, where, skip=w.name)
                continue
            gang = r.start == "Gang"
            if not r.is_array and (r.on_failure == "RestartJob" or (gang and w.rank == 0)):
                self.restart_run(r, where, StopCause.RUN_RESTART, w)
                continue
            ran = (w.ended_at or self.now) - w.started_at if w.started_at is not None else 0
            n = (0 if ran >= RESET_AFTER_SECONDS else w.restarts) + 1
            if n > RESTART_LIMIT and not r.service:
                self.emit(MarkWorker(w.name, w.state, w.reason, final=True), r.name)
                if not r.is_array:
                    self.fail_run(r, f"{where}; no restarts left ({RESTART_LIMIT} used)", skip=w.name)
                continue
            delay = backoff_seconds(n)
            limit = "" if r.service else f" of {RESTART_LIMIT}"
            self.emit(
                RequeueWorker(w.name, self.now + delay, n, f"{w.reason}; restart {n}{limit} in {delay} s"),
                r.name,
            )

    def time_limits(self) -> None:
        s = self.s
        for wname in sorted(set(s.due(self.now, "deadline"))):
            w = s.workers.get(wname)
            if w is None or w.state is not WorkerState.RUNNING or w.run in self.frozen:
                continue
            limit = s.template(w).time_limit_seconds
            if limit is None or w.started_at is None or w.started_at + limit > self.now:
                continue
            r = s.runs[w.run]
            reason = f"Stopped at its time limit of {format_duration(limit)}"
            self.emit(StopWorker(w.name, StopCause.TIME_LIMIT, WorkerState.FAILED, reason), r.name)
            if not r.is_array and not r.service:
                self.fail_run(r, f"Worker {w.name} failed on {w.machine}: {reason}", skip=w.name)

    def barriers(self) -> None:
        s = self.s
        for rname in sorted(set(s.due(self.now, "barrier"))):
            r = s.runs.get(rname)
            if r is None or rname in self.frozen or r.state in RUN_DONE or r.start != "Gang":
                continue
            if r.placed_at is None or r.placed_at + GANG_BARRIER_SECONDS > self.now:
                continue
            c = s.counts[rname]
            n = len(s.run_workers[rname])
            if c[WorkerState.RUNNING] == n:
                continue
            late = n - c[WorkerState.READY] - c[WorkerState.RUNNING]
            why = f"Gang barrier: {late} of {n} workers not ready after {GANG_BARRIER_SECONDS // 60} minutes"
            policy = s.template(s.workers[s.run_workers[rname][0]]).restart_policy
            if r.on_failure == "FailJob" or (policy == "Never" and not r.service):
                self.fail_run(r, why)
            else:
                self.restart_run(r, why, StopCause.BARRIER, None)

    def starts(self) -> None:
        s = self.s
        for rname, ready in s.ready.items():
            if not ready or rname in self.frozen:
                continue
            r = s.runs[rname]
            if r.state in RUN_DONE:
                continue
            c = s.counts[rname]
            if (
                r.start == "Gang"
                and c[WorkerState.RUNNING] == 0
                and c[WorkerState.READY] < len(s.run_workers[rname])
            ):
                continue  # the barrier holds until every worker is ready
            for wname in list(ready):
                self.emit(StartWorker(wname), rname)

    def run_states(self) -> None:
        s = self.s
        for rname in list(s.active):
            if rname in self.touched:
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
                    state, reason = RunState.COMPLETED, f"All {n} workers completed"
                elif r.is_array:
                    state, reason = (
                        RunState.FAILED,
                        msg.ARRAY_FAILED_REASON.format(failed=failed, total=n, first=r.first_failure),
                    )
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
                self.emit(MarkRun(rname, state, reason), rname)

    # -- placement ----------------------------------------------------------------------------

    def placement(self) -> None:
        s = self.s
        order = sorted(s.active, key=lambda n: (-s.runs[n].priority, s.runs[n].seq))
        for rname in order:
            r = s.runs[rname]
            if rname in self.frozen or r.cancel_requested or r.state in RUN_DONE:
                continue
            if not r.admitted:
                for d in _admit(s, r, self.memo):
                    self.emit(d, rname)
                continue
            if r.not_before is not None and r.not_before > self.now:
                continue
            if not s.pending[rname] and s.run_workers[rname]:
                continue
            if self.blocker is not None and not self.may_backfill(r):
                self.set_run_reason(r, f"Waiting behind run {self.blocker.name}, queued ahead of it")
                continue
            blocked = self.place_run(r)
            if blocked is not None:
                self.set_run_reason(r, blocked)
                if self.blocker is None:
                    self.blocker = r

    def set_run_reason(self, r: RunRecord, reason: str) -> None:
        """A waiting run's reason, on the run and on its next waiting worker."""
        if any(run == r.name for run, _ in self.placed):
            return  # it placed workers this tick: not waiting as a whole
        if r.state is RunState.PENDING and r.reason != reason and r.name not in self.marked:
            self.emit(MarkRun(r.name, RunState.PENDING, reason), r.name)
        head = next(iter(self.s.pending[r.name]), None)
        if head is not None and self.s.workers[head].reason != reason:
            self.emit(MarkWorker(head, WorkerState.PENDING, reason), r.name)

    def may_backfill(self, r: RunRecord) -> bool:
        limits = [tt.time_limit_seconds for tt in _templates(r.run)]
        if any(x is None for x in limits):
            return False
        return self.now + max(limits) <= self.shadow()  # type: ignore[type-var]

    def shadow(self) -> float:
        """When the blocked run could start, if running workers end at their time limits."""
        if self._shadow is not None:
            return self._shadow
        s, b = self.s, self.blocker
        assert b is not None
        ends = []
        for name in s.active:
            for w in s.workers_of(name) if s.holding(name) else ():
                if w.state in HOLDING:
                    limit = s.template(w).time_limit_seconds
                    end = INF if limit is None else (w.started_at or self.now) + limit
                    ends.append((end, w.name))
        ends.sort()
        view = _View(s)
        view.over = dict(self.view.over)
        self._shadow = INF
        for end, wname in ends:
            if end == INF:
                break
            view.give(s.workers[wname])
            if self.fits_somehow(b, view):
                self._shadow = end
                break
        return self._shadow

    def fits_somehow(self, r: RunRecord, view: _View) -> bool:
        s = self.s
        pending = [s.workers[n] for n in s.pending[r.name]]
        net = _Net.of(r.run)
        if not s.run_workers[r.name]:
            tt = r.run.spec.task_template
            assert tt and tt.requested_resources and tt.requested_resources.gpu_requests
            gr = tt.requested_resources.gpu_requests
            return _shape(view, ask_of(tt), gr.count, gr.min_per_machine or 1, net, self.memo) is not None
        w = pending[0] if pending else None
        if w is None:
            return True
        return any(view.fits(m, w.ask, w.ask.gpus) for m in view.candidates(w.ask.gpus))

    def place_run(self, r: RunRecord) -> str | None:
        """Place what can be placed now; the reason it waits when blocked for room, else None."""
        s, view, rname = self.s, self.view, r.name
        net = _Net.of(r.run)
        if not s.run_workers[rname]:  # the shape is chosen now
            tt = r.run.spec.task_template
            assert tt and tt.requested_resources and tt.requested_resources.gpu_requests
            gr = tt.requested_resources.gpu_requests
            ask = ask_of(tt)
            k_min = gr.min_per_machine or 1
            got = self.memo.shape(view, ask, gr.count, k_min, net)
            if got is None and self.preempt_for(r, lambda v: _shape(v, ask, gr.count, k_min, net, self.memo)):
                got = self.memo.shape(view, ask, gr.count, k_min, net)
            if got is None:
                return f"Waiting for room: {gr.count} GPUs{_label(ask)} on one network"
            k = len(got)
            for rank, (m, g) in enumerate(got):
                new = NewWorker(f"{rname}-{rank}", rname, rank, k, ask.with_gpus(g))
                self.emit(_place_decision(view, new.name, m, new.ask, g, new), rname)
            return None
        now = self.now
        # lazily: an array stops reading its waiting copies once its cap is reached
        eligible: Iterator[str] = (n for n in s.pending[rname] if (s.workers[n].not_before or 0) <= now)
        holding = s.holding(rname)
        if (r.start == "Gang" and holding == 0) or (r.start == "MinAvailable" and holding == 0):
            need = len(s.run_workers[rname]) if r.start == "Gang" else (r.run.spec.min_available or 1)
            first = list(itertools.islice(eligible, need))
            if len(first) < need:
                return None
            group = [s.workers[n] for n in first]
            asks = [(w.name, w.ask) for w in group]
            distinct = r.run.spec.task_groups is None
            got = self.memo.fixed(view, asks, net, distinct)
            if got is None and self.preempt_for(r, lambda v: _fixed(v, asks, net, distinct)):
                got = self.memo.fixed(view, asks, net, distinct)
            if got is None:
                what = "every worker together" if r.start == "Gang" else f"{need} workers together"
                return f"Waiting for room: {what}"
            for wname, m in got:
                w = s.workers[wname]
                self.emit(_place_decision(view, wname, m, w.ask, w.ask.gpus), rname)
            if r.start == "Gang":
                return None
            holding += need
        return self.place_each(r, eligible, holding, net)

    def place_each(self, r: RunRecord, eligible: Iterator[str], holding: int, net: _Net) -> str | None:
        s, view, rname = self.s, self.view, r.name
        spec = r.run.spec
        cap = spec.array.max_parallel if spec.array and spec.array.max_parallel else None
        distinct = spec.array is None and spec.task_groups is None
        anchor = None
        if (net.slowest < 5 or net.keep) and holding:
            placed = [
                s.workers[n]
                for n in s.run_workers[rname]
                if s.workers[n].machine and s.workers[n].state in HOLDING
            ]
            anchor = s.machines[placed[0].machine] if placed else None  # type: ignore[index]
        group_running = self.groups_running(r) if spec.task_groups else None
        cand: Iterator[Machine] | None = None
        current: Machine | None = None
        last_ask: Ask | None = None
        for wname in eligible:
            w = s.workers[wname]
            if cap is not None and holding >= cap:
                if w.reason != array_cap(cap):
                    self.emit(MarkWorker(wname, WorkerState.PENDING, array_cap(cap)), rname)
                return None
            if group_running is not None and w.group is not None:
                after = next(g.start_after for g in spec.task_groups or () if g.name == w.group)
                if after and not group_running.get(after):
                    reason = f"Waiting for group {after} to run"
                    if w.reason != reason:
                        self.emit(MarkWorker(wname, WorkerState.PENDING, reason), rname)
                    continue
            ask = w.ask
            if ask != last_ask:
                cand, current, last_ask = view.candidates(ask.gpus), None, ask
            assert cand is not None
            pick = None
            while True:
                if (
                    current is not None
                    and view.fits(current, ask, ask.gpus)
                    and self.allowed(current, r, net, anchor, distinct)
                ):
                    pick = current
                    break
                current = next(cand, None)
                if current is None:
                    break
            if pick is None and self.preempt_for(
                r, lambda v, a=ask, an=anchor: self.one_fit(v, a, r, net, an, distinct)
            ):
                pick = self.one_fit(view, ask, r, net, anchor, distinct)
            if pick is None:
                cores = ask.cores(ask.gpus)
                return f"Waiting for room: {ask.gpus} GPUs{_label(ask)}, {cores} cores on one machine"
            self.emit(_place_decision(view, wname, pick, ask, ask.gpus), rname)
            if anchor is None and (net.slowest < 5 or net.keep):
                anchor = pick
            if distinct:
                current = None
            holding += 1
        return None

    def allowed(self, m: Machine, r: RunRecord, net: _Net, anchor: Machine | None, distinct: bool) -> bool:
        if anchor is not None and not net.same_group(m, anchor):
            return False
        if distinct:
            if (r.name, m.name) in self.placed:
                return False
            return not any(self.s.workers[n].run == r.name for n in self.s.on_machine[m.name])
        return True

    def one_fit(self, view: _View, ask: Ask, r: RunRecord, net: _Net, anchor: Machine | None, distinct: bool):
        for m in view.candidates(ask.gpus):
            if view.fits(m, ask, ask.gpus) and self.allowed(m, r, net, anchor, distinct):
                return m
        return None

    def groups_running(self, r: RunRecord) -> dict[str, bool]:
        out: dict[str, bool] = {}
        for w in self.s.workers_of(r.name):
            assert w.group is not None
            out[w.group] = out.get(w.group, True) and w.state is WorkerState.RUNNING
        return out

    def preempt_for(self, r: RunRecord, place) -> bool:
        """Stop lower-priority workers so that ``place(view)`` succeeds; True when it now does."""
        s = self.s
        if not s.holding_priorities or min(s.holding_priorities) >= r.priority:
            return False
        lower = [
            s.workers[n]
            for m in s.on_machine.values()
            for n in m
            if s.runs[s.workers[n].run].priority < r.priority and s.workers[n].run not in self.touched
        ]
        if not lower:
            return False
        trial = _View(s)
        trial.over = dict(self.view.over)
        for w in lower:
            trial.give(w)
        got = place(trial)
        if got is None:
            return False
        machines = _machines_of(got)
        victims: dict[str, WorkerRecord] = {}
        for w in sorted(lower, key=lambda w: (s.runs[w.run].priority, -(w.started_at or 0))):
            if w.machine not in machines:
                continue
            victims[w.name] = w
            vr = s.runs[w.run]
            if vr.start == "Gang" or (vr.on_failure == "RestartJob" and not vr.is_array):
                for other in s.workers_of(vr.name):
                    if other.state in HOLDING:
                        victims[other.name] = other
            check = _View(s)
            check.over = dict(self.view.over)
            for v in victims.values():
                check.give(v)
            if place(check) is not None:
                break
        reason = f"Preempted for higher-priority run {r.name}; back in the queue"
        for v in victims.values():
            self.view.give(v)
            self.emit(StopWorker(v.name, StopCause.PREEMPTED, WorkerState.PENDING, reason), v.run)
        return True


def _machines_of(got) -> set[str]:
    """The machines a placement uses, whichever placer made it."""
    if isinstance(got, Machine):
        return {got.name}
    return {x.name for pair in got for x in pair if isinstance(x, Machine)}


def plan_tick(state: ClusterState, now: float) -> list[Decision]:
    """This tick's decisions; pure: reads ``state`` and ``now`` only."""
    t = _Tick(state, now)
    t.cancellations()
    t.settle()
    t.time_limits()
    t.barriers()
    t.starts()
    t.run_states()
    t.placement()
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


# ---- inside a worker ------------------------------------------------------------------------------


def worker_env(run: Run, worker: WorkerRecord | NewWorker, leader_address: str | None) -> dict[str, str]:
    """The environment Astraeus sets in a worker (CONTRACT §6), over the template's own env."""
    spec = run.spec
    template = spec.task_template
    if worker.group is not None and spec.task_groups:
        template = next(g.task_template for g in spec.task_groups if g.name == worker.group)
    env = dict(template.env or {}) if template else {}
    rank, size = str(worker.rank), str(worker.world_size)
    env.update({"RANK": rank, "WORLD_SIZE": size, "SLURM_PROCID": rank, "SLURM_NTASKS": size})
    if spec.array is not None:
        env.update(
            {"ASTRAEUS_ARRAY_TASK_ID": rank, "ASTRAEUS_ARRAY_SIZE": size, "ASTRAEUS_REPLICA_INDEX": rank}
        )
    elif worker.world_size > 1:
        env.update({"MASTER_ADDR": leader_address or "", "MASTER_PORT": str(MASTER_PORT)})
    return dict(sorted(env.items()))
