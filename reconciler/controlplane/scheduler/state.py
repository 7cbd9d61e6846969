"""The state the scheduler reads: runs, workers and free capacity, with the indexes that keep a tick cheap.

Owns: ``ClusterState``: the records by name, the free room of each machine (and machines bucketed by
free GPUs), the waiting, ready, unsettled and holding workers of each run, the counts of worker
states, each workspace's quota and what it holds (GPUs, runs holding machines), and the timers
(retries, backoffs, barriers, time limits) as a heap; the runs asked to cancel and the runs with
a worker ready. Every change to a run or one of its workers is told to the ticks' memo
(``_touch``: what it knows of that run holds no more, ``quiet``). ``submit``,
``observe`` and ``apply`` are the one place records change, written so that a store can do the
same with rows (the simulation and the engine call them). It also holds what ticks learned and
keep (``netgroups``, ``verdicts``, ``fits_alone``, ``quiet``): caches that change no decision.

Must not touch: clocks (``now`` is an argument), I/O, the decisions' reasons (a tick chooses those),
placement. The indexes change only together with the records they index.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.runspec.lifecycle import RESTARTED_AFTER as ENDED_AS
from reconciler.runspec.lifecycle import RESTARTED_FOR as STOPPED_FOR
from reconciler.runspec.messages import GANG_BARRIER_SECONDS
from reconciler.runspec.models import Run, TaskTemplate
from reconciler.runspec.vocabulary import (
    CONTAINER_RUNNING,
    FINAL_RUN_STATES,
    STALE_TIMEOUT_SECONDS,
    RunState,
    WorkerState,
    exited,
    machine_lost,
    pulling,
    stale,
    worker_failed_on,
)

from ..inventory import Inventory
from ..scopes import shown, workspace_of
from .quiet import Quiet
from .records import (
    ENDED,
    HOLDING,
    AdmitRun,
    Ask,
    CancelRun,
    Decision,
    Free,
    ImagePulling,
    LoseWorker,
    MachineBack,
    MachineLost,
    MachineUnreachable,
    MarkRun,
    MarkWorker,
    NewWorker,
    Observation,
    PlaceWorker,
    Quota,
    RequeueWorker,
    RestartRun,
    RunRecord,
    StartWorker,
    StopWorker,
    WorkerExited,
    WorkerReady,
    WorkerRecord,
)

#: a count of 0 for each state of ``HOLDING`` (``ClusterState.holding``)
_NONE_OF_EACH = (0,) * len(HOLDING)

__all__ = ["ClusterState"]


@dataclass(eq=False)
class ClusterState:
    """Runs, workers and free capacity, with the indexes that keep a tick cheap.

    Only ``submit``, ``observe`` and ``apply`` change it; ``plan_tick`` reads it.
    """

    inventory: Inventory
    runs: dict[str, RunRecord] = field(default_factory=dict)
    workers: dict[str, WorkerRecord] = field(default_factory=dict)
    #: Each workspace's quota (``ORG/WORKSPACE``: ``scopes.workspace_of`` a run's key); absent: none.
    quotas: dict[str, Quota] = field(default_factory=dict)
    #: Why no worker can have its drives mounted here (no sandbox), or ``None``: a run with
    #: drives then waits with this reason (``queue.placement``), never started without them.
    no_sandbox: str | None = None
    #: Runs that wait for something the scheduler does not keep and that does not exist yet (a
    #: drive, a secret: ``controlplane.needs`` finds them), with why in words (``set_waiting``).
    waiting: dict[str, str] = field(default_factory=dict)
    #: Workspaces whose GPU-hour budget is spent, and the words their new runs wait with (the
    #: engine's ``budgets`` sets it before each tick): a run holding nothing does not start.
    spent: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.machines = {m.name: m for m in self.inventory}
        self.max_gpus = self.inventory.largest_gpus
        #: What each machine has free, changed in place as workers take and give room.
        self.free: dict[str, Free] = {m.name: Free.of(m) for m in self.inventory}
        self.buckets: list[dict[str, None]] = [{} for _ in range(self.max_gpus + 1)]
        for m in self.inventory:
            self.buckets[m.gpus][m.name] = None
        self.down: set[str] = set()
        #: Machines that stopped reporting, since when; their workers' states before (``Stale``).
        self.unreachable: dict[str, float] = {}
        self.stale_from: dict[str, tuple[WorkerState, str]] = {}
        #: Machines no new worker goes to: lost or not reporting.
        self.unusable: set[str] = set()
        self.on_machine: dict[str, dict[str, None]] = {m.name: {} for m in self.inventory}
        self.run_workers: dict[str, list[str]] = {}
        self.pending: dict[str, dict[str, None]] = {}
        self.counts: dict[str, Counter[WorkerState]] = {}
        self.final_counts: dict[str, list[int]] = {}  # [ended for good, failed for good]
        self.active: dict[str, None] = {}
        self.unsettled: dict[str, None] = {}
        self.ready: dict[str, dict[str, None]] = {}
        #: The runs with a worker in ``ready`` (``gangs.starts`` looks at these only).
        self.readying: dict[str, None] = {}
        self.holding_priorities: Counter[int] = Counter()
        #: Each run's workspace; what each workspace holds: GPUs, and runs holding a machine.
        self.ws_of: dict[str, str] = {}
        self.ws_gpus: Counter[str] = Counter()
        self.ws_runs: Counter[str] = Counter()
        self.timers: list[tuple[float, int, str, str]] = []
        #: What the inventory alone decides, kept once made: the network groups that could hold
        #: a run (``netgroups.feasible``), per ask, constraint and one-worker-a-machine.
        self.netgroups: dict[tuple[Any, ...], Any] = {}
        #: Why what a template asks of one machine fits no machine (or ``None``), per ask
        #: (``admission``): the inventory's answer, kept once made.
        self.verdicts: dict[tuple[Any, ...], str | None] = {}
        #: Whether one worker of an ask fits on some machine of the empty cluster (``admission``).
        self.fits_alone: dict[Ask, bool] = {}
        #: Moves when the order runs are served in may have: a run added, a priority changed.
        self.order_version = 0
        #: Runs a user asked to cancel that are not finished yet (``runstates.cancellations``).
        self.cancelling: dict[str, None] = {}
        #: What ticks learned of the runs whose last visit changed nothing, kept across ticks
        #: (``quiet.Quiet``): it changes no decision, only how much a tick visits.
        self.quiet = Quiet()
        self._seq = 0
        self._timer_seq = 0
        runs, workers = self.runs, self.workers
        self.runs, self.workers = {}, {}
        for r in sorted(runs.values(), key=lambda r: r.seq):
            self._add_run(r)
        for w in sorted(workers.values(), key=lambda w: (w.run, w.rank)):
            self._add_worker(w)

    # -- building ----------------------------------------------------------------------------

    def _touch(self, run: str) -> None:
        """Run ``run`` (its record, a worker's, an index of them) changed: what the ticks' memo
        knows of it holds no more (``quiet``)."""
        quiet = self.quiet
        quiet.stale[run] = None
        quiet.moved[run] = None

    def _add_run(self, r: RunRecord) -> None:
        self.runs[r.name] = r
        self._touch(r.name)
        self.order_version += 1
        if r.cancel_requested and r.state not in FINAL_RUN_STATES:
            self.cancelling[r.name] = None
        self.ws_of[r.name] = workspace_of(r.name)
        self._seq = max(self._seq, r.seq + 1)
        self.run_workers.setdefault(r.name, [])
        self.pending.setdefault(r.name, {})
        self.counts.setdefault(r.name, Counter())
        self.final_counts.setdefault(r.name, [0, 0])
        self.ready.setdefault(r.name, {})
        if r.state not in FINAL_RUN_STATES:
            self.active[r.name] = None
        if r.not_before is not None:
            self._timer(r.not_before, "run", r.name)
        if r.placed_at is not None and r.start == "Gang":
            self._timer(r.placed_at + GANG_BARRIER_SECONDS, "barrier", r.name)

    def _add_worker(self, w: WorkerRecord) -> None:
        self.workers[w.name] = w
        self._touch(w.run)
        self.run_workers[w.run].append(w.name)
        self.counts[w.run][w.state] += 1
        if w.state is WorkerState.PENDING:
            self.pending[w.run][w.name] = None
            if w.not_before is not None:
                self._timer(w.not_before, "worker", w.name)
        if w.state in HOLDING and self.holding(w.run) == 1:
            self.ws_runs[self.ws_of[w.run]] += 1
        if w.state in HOLDING and w.machine is not None:
            self._take(w.machine, w.gpus - w.unhealthy_gpus, w.unhealthy_gpus, w.cpu_cores, w.memory_bytes)
            self.on_machine[w.machine][w.name] = None
            self.holding_priorities[self.runs[w.run].priority] += 1
            self.ws_gpus[self.ws_of[w.run]] += w.gpus
        if w.state is WorkerState.READY:
            self.ready[w.run][w.name] = None
            self.readying[w.run] = None
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
        self._touch(name)
        self.order_version += 1
        if held:
            self.holding_priorities[r.priority] += held

    def submit(self, run: Run, now: float, key: str | None = None) -> RunRecord:
        """Queue a new run (the API's POST /runs) under ``key`` (``scopes.run_key``; left out:
        its name, the default scope's key); the next tick admits it."""
        name = key or run.metadata.name
        if name in self.runs:
            raise ValueError(f"run {name} exists")
        record = RunRecord(name=name, run=run, seq=self._seq, submitted_at=now)
        self._add_run(record)
        return record

    # -- capacity ----------------------------------------------------------------------------

    def _rebucket(self, name: str, before: int) -> None:
        after = self.free[name].gpus
        if name in self.down:
            self.buckets[before].pop(name, None)
            return
        if after != before or name not in self.buckets[after]:
            self.buckets[before].pop(name, None)
            self.buckets[after][name] = None

    def _take(self, name: str, gh: int, gu: int, cores: int, mem: int) -> None:
        f = self.free[name]
        before = f.gpus
        f.take(gh, gu, cores, mem)
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
        """How many of ``run``'s workers hold a machine (``dict.get``: a ``Counter``'s own
        lookup of a state it has not seen calls ``__missing__`` in Python, the most of a quiet
        tick's visit of a run its quota holds)."""
        return sum(map(self.counts[run].get, HOLDING, _NONE_OF_EACH))

    def set_quota(self, workspace: str, quota: Quota | None) -> None:
        """Set (``None``: lift) a workspace's quota; the next tick holds it (runs holding more keep it)."""
        if quota is None or quota == Quota():
            self.quotas.pop(workspace, None)
        else:
            self.quotas[workspace] = quota

    def set_waiting(self, run: str, reason: str | None) -> None:
        """Run ``run`` waits for something that does not exist yet, with ``reason`` (``None``:
        it no longer does); the next tick holds it, or places it."""
        if self.waiting.get(run) == reason:
            return
        if reason is None:
            del self.waiting[run]
        else:
            self.waiting[run] = reason
        if run in self.runs:
            self._touch(run)

    # -- changing records --------------------------------------------------------------------

    def _set_state(self, w: WorkerRecord, state: WorkerState, reason: str) -> None:
        old = w.state
        run = self.runs[w.run]
        self._touch(w.run)
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
                if not self.ready[w.run]:
                    self.readying.pop(w.run, None)
            if state is WorkerState.READY:
                self.ready[w.run][w.name] = None
                self.readying[w.run] = None
            if old in HOLDING and state not in HOLDING:
                self._release(w, run)
            if old is WorkerState.STALE:
                self.stale_from.pop(w.name, None)
        w.state = state
        w.reason = reason

    def _release(self, w: WorkerRecord, run: RunRecord) -> None:
        ws = self.ws_of[w.run]
        if w.machine is not None:
            self.on_machine[w.machine].pop(w.name, None)
            self._give(w.machine, w.gpus - w.unhealthy_gpus, w.unhealthy_gpus, w.cpu_cores, w.memory_bytes)
            self.holding_priorities[run.priority] -= 1
            if self.holding_priorities[run.priority] <= 0:
                del self.holding_priorities[run.priority]
            self.ws_gpus[ws] -= w.gpus
        if self.holding(w.run) == 0:
            run.placed_at = None
            self.ws_runs[ws] -= 1

    def _count_final(self, w: WorkerRecord) -> None:
        fc = self.final_counts[w.run]
        fc[0] += 1
        if w.state is not WorkerState.COMPLETED:
            fc[1] += 1
            run = self.runs[w.run]
            if run.first_failure is None:
                run.first_failure = worker_failed_on(shown(w.name), w.machine, w.reason)

    def _end(self, w: WorkerRecord, state: WorkerState, reason: str, now: float) -> None:
        self._set_state(w, state, reason)
        w.ended_at = now
        w.settled = False
        self.unsettled[w.name] = None

    def observe(self, event: Observation, now: float) -> None:
        """Record what an executor (or a user) reports."""
        if isinstance(event, ImagePulling):
            w = self.workers.get(event.worker)
            if w is not None and w.state is WorkerState.PREPARING:
                self._set_state(w, WorkerState.PULLING, pulling(self.template(w).image))
        elif isinstance(event, WorkerReady):
            w = self.workers.get(event.worker)
            if w is not None and w.state in (WorkerState.PREPARING, WorkerState.PULLING):
                self._set_state(w, WorkerState.READY, "Prepared; waiting to start")
        elif isinstance(event, WorkerExited):
            w = self.workers.get(event.worker)
            if w is not None and w.state in (WorkerState.RUNNING, WorkerState.STALE):
                w.exit_code = event.exit_code
                state = WorkerState.COMPLETED if event.exit_code == 0 else WorkerState.FAILED
                self._end(w, state, event.reason or exited(event.exit_code), now)
        elif isinstance(event, MachineUnreachable):
            self._unreachable(event.machine, now)
        elif isinstance(event, MachineLost):
            self._lost(event.machine, now)
        elif isinstance(event, MachineBack):
            self._back(event.machine)
        elif isinstance(event, CancelRun):
            run = self.runs.get(event.run)
            if run is not None and run.state not in FINAL_RUN_STATES:
                run.cancel_requested = True
                self.cancelling[run.name] = None
                self._touch(run.name)
        else:  # pragma: no cover - closed union
            raise TypeError(event)

    # -- machines that stop reporting, are lost, come back -----------------------------------

    def _unreachable(self, machine: str, now: float) -> None:
        """Its workers Stale (as they were, kept to come back to); it takes no new worker; a timer
        counts them lost after ``STALE_TIMEOUT_SECONDS`` (``restarts.stale_workers``)."""
        if machine in self.down or machine in self.unreachable:
            return
        self.unreachable[machine] = now
        self.unusable.add(machine)
        self._timer(now + STALE_TIMEOUT_SECONDS, "stale", machine)
        for name in list(self.on_machine[machine]):
            w = self.workers[name]
            self.stale_from[name] = (w.state, w.reason)
            self._set_state(w, WorkerState.STALE, stale(machine))

    def _lost(self, machine: str, now: float) -> None:
        """Its workers Down at once (the restart rules apply), itself out until it is back."""
        self.unreachable.pop(machine, None)
        for name in list(self.on_machine[machine]):
            self._end(self.workers[name], WorkerState.DOWN, machine_lost(machine), now)
        self.buckets[self.free[machine].gpus].pop(machine, None)
        self.down.add(machine)
        self.unusable.add(machine)

    def _back(self, machine: str) -> None:
        """It reports again: Stale workers as they were (a running one's time limit still holds)."""
        if self.unreachable.pop(machine, None) is not None:
            for name in list(self.on_machine[machine]):
                w = self.workers[name]
                was = self.stale_from.pop(name, None)
                if w.state is WorkerState.STALE and was is not None:
                    self._set_state(w, *was)
                    if w.state is WorkerState.RUNNING:
                        self._deadline(w)
        if machine in self.down:
            self.down.discard(machine)
            self.buckets[self.free[machine].gpus][machine] = None
        self.unusable.discard(machine)

    def carry_over(self, old: ClusterState) -> None:
        """What the records do not keep, from the state this one is rebuilt from: which machines
        are lost, and which stopped reporting since when (with their workers' states before),
        the workspaces' quotas, and what runs wait for."""
        self.quotas.update(old.quotas)
        self.waiting.update({n: why for n, why in old.waiting.items() if n in self.runs})
        for machine in old.down:
            self._lost(machine, 0.0)
        for machine, since in old.unreachable.items():
            self.unreachable[machine] = since
            self.unusable.add(machine)
            self._timer(since + STALE_TIMEOUT_SECONDS, "stale", machine)
        self.stale_from.update({n: v for n, v in old.stale_from.items() if n in self.workers})

    def apply(self, decisions: Iterable[Decision], now: float) -> None:
        """Carry decisions into the records (what the store does with rows)."""
        for d in decisions:
            if isinstance(d, PlaceWorker):
                self._place(d, now)
            elif isinstance(d, StartWorker):
                self._start(d, now)
            elif isinstance(d, StopWorker):
                self._stop(d, now)
            elif isinstance(d, RequeueWorker):
                self._requeue(d)
            elif isinstance(d, MarkWorker):
                self._mark_worker(d)
            elif isinstance(d, MarkRun):
                self._mark_run(d)
            elif isinstance(d, RestartRun):
                self._restart_run(d)
            elif isinstance(d, AdmitRun):
                self._admit(d)
            elif isinstance(d, LoseWorker):
                self._end(self.workers[d.worker], WorkerState.DOWN, d.reason, now)
            else:  # pragma: no cover - closed union
                raise TypeError(d)

    # -- one decision each -------------------------------------------------------------------

    def _new_worker(self, n: NewWorker) -> None:
        self._add_worker(WorkerRecord(n.name, n.run, n.rank, n.world_size, n.ask, n.group, n.group_rank))

    def _place(self, d: PlaceWorker, now: float) -> None:
        if d.new is not None and d.new.name not in self.workers:
            self._new_worker(d.new)
        w = self.workers[d.worker]
        run = self.runs[w.run]
        if self.holding(w.run) == 0:
            run.placed_at = now
            self.ws_runs[self.ws_of[w.run]] += 1
            if run.start == "Gang":
                self._timer(now + GANG_BARRIER_SECONDS, "barrier", run.name)
        self._set_state(w, WorkerState.PREPARING, f"Preparing on {d.machine}")
        w.machine, w.gpus, w.unhealthy_gpus = d.machine, d.gpus, d.unhealthy_gpus
        w.cpu_cores, w.memory_bytes = d.cpu_cores, d.memory_bytes
        w.placed_at, w.started_at, w.ended_at, w.exit_code = now, None, None, None
        w.not_before = None
        self._take(d.machine, d.gpus - d.unhealthy_gpus, d.unhealthy_gpus, d.cpu_cores, d.memory_bytes)
        self.on_machine[d.machine][w.name] = None
        self.holding_priorities[run.priority] += 1
        self.ws_gpus[self.ws_of[w.run]] += d.gpus

    def _start(self, d: StartWorker, now: float) -> None:
        w = self.workers[d.worker]
        self._set_state(w, WorkerState.RUNNING, CONTAINER_RUNNING)
        w.started_at = now
        w.attempts += 1
        self._deadline(w)
        run = self.runs[w.run]
        if run.running_since is None:
            run.running_since = now

    def _stop(self, d: StopWorker, now: float) -> None:
        w = self.workers[d.worker]
        self._set_state(w, d.state, d.reason)
        w.ended_at = now
        if d.state is WorkerState.PENDING:
            w.restart_reason = STOPPED_FOR.get(d.cause, str(d.cause))
            w.not_before = d.not_before
            if d.not_before is not None:
                self._timer(d.not_before, "worker", w.name)
        elif not w.final:
            w.final = True
            w.settled = True
            self.unsettled.pop(w.name, None)
            self._count_final(w)

    def _requeue(self, d: RequeueWorker) -> None:
        w = self.workers[d.worker]
        was_final = w.final
        w.restart_reason = ENDED_AS.get(w.state, str(w.state))
        self._set_state(w, WorkerState.PENDING, d.reason)
        w.not_before, w.restarts, w.settled, w.final = d.at, d.restarts, True, False
        if was_final:
            fc = self.final_counts[w.run]
            fc[0] -= 1
            if w.exit_code != 0:
                fc[1] -= 1
        self.unsettled.pop(w.name, None)
        self._timer(d.at, "worker", w.name)

    def _mark_worker(self, d: MarkWorker) -> None:
        w = self.workers[d.worker]
        self._set_state(w, d.state, d.reason)
        if d.final and not w.final:
            w.final = True
            self._count_final(w)
        if d.state in ENDED:
            w.settled = True
            self.unsettled.pop(w.name, None)

    def _mark_run(self, d: MarkRun) -> None:
        run = self.runs[d.run]
        run.state, run.reason = d.state, d.reason
        self._touch(d.run)
        if d.state in FINAL_RUN_STATES:
            self.active.pop(d.run, None)
            self.cancelling.pop(d.run, None)
        if d.state is not RunState.RUNNING:
            run.running_since = None

    def _restart_run(self, d: RestartRun) -> None:
        run = self.runs[d.run]
        run.state, run.reason = RunState.PENDING, d.reason
        run.restarts, run.not_before, run.running_since = d.restarts, d.at, None
        self._touch(d.run)
        self._timer(d.at, "run", d.run)

    def _admit(self, d: AdmitRun) -> None:
        run = self.runs[d.run]
        run.admitted, run.start, run.on_failure = True, d.start, d.on_failure
        self._touch(d.run)
        self._add_created(d.run, d.workers)

    def _add_created(self, run: str, made: Sequence[NewWorker]) -> None:
        """Run ``run``'s workers as admission makes them (pending, placed nowhere, due at no time),
        indexed at once as ``_add_worker`` indexes each (``test_admit_indexes``): a dry run of
        155,000 copies spent half its time indexing them one at a time."""
        records = [
            WorkerRecord(n.name, run, n.rank, n.world_size, n.ask, n.group, n.group_rank) for n in made
        ]
        names = [w.name for w in records]
        self.workers.update(zip(names, records, strict=True))
        self.run_workers[run].extend(names)
        self.counts[run][WorkerState.PENDING] += len(records)
        self.pending[run].update(dict.fromkeys(names))
