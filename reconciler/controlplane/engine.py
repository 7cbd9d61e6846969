"""The driver of the control plane: the live scheduler state, its store and its executor, in step.

Owns: ``Engine``, the one object that changes a cluster. It keeps the scheduler's
``ClusterState`` in memory (loaded from the store at start), and

* ``submit`` / ``update`` / ``delete`` a run: each one transaction in the store; ``submit_batch``:
  many runs (and their inventory entries) in one;
* ``step(now)``: one tick: the executor's observations, then ``plan_tick`` → ``apply`` → the
  executor, repeated until nothing more happens at this instant, a slice of the released workers'
  processes started (``start_processes``, which the server calls after the step instead, outside
  the API's gate), then everything the tick changed
  (new workers, changed workers and runs, an event per decision and observation, the executor's
  process facts) written in ONE transaction with bulk statements; a step admits runs until it
  has done ``ADMIT_SLICE`` of that work, and says when runs remain to admit (``more``: the
  server's loop steps again at once, after the routes waiting for the engine);
* ``schedules``: the runs on a schedule (``schedule_book``), whose runs due each step makes
  first;
* ``recover``: at start, workers that held a machine when the last server stopped have no
  process any more (one that somehow survived is killed): a running one is marked lost (``Down``,
  so the restart rules apply to it), one still preparing goes back to the queue.

**Clusters and workspaces.** One engine drives one cluster (``cluster``: its name, ``default``
unless ``astra server --inventory NAME=FILE`` named more; each has its own engine over the one
store). Every workspace's runs share it: a run is known by its key (``scopes.run_key``: its name
in the default scope, ``ORG/WORKSPACE/CLUSTER/NAME`` in another), its workers by theirs, and
``runs_of(scope)`` lists a scope's keys in submission order. ``set_quota`` gives a workspace's
quota to the scheduler, which holds it (``scheduler.quotas``).

It reads no clock of its own: ``now`` comes from the caller (the server's loop reads a
``SystemClock``; tests and benchmarks pass a ``ManualClock``'s time). The executor is anything
with ``handle``/``pop_due`` (``ProcessExecutor`` or ``simulation.SimulatedExecutor``).

Must not touch: HTTP (``api``), the process model (``executor``), SQL (``store``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from reconciler.runspec.errors import InvalidSpec
from reconciler.runspec.models import Run
from reconciler.runspec.normalize import normalize
from reconciler.runspec.vocabulary import FINAL_RUN_STATES, validate_update

from .budgets import BudgetBook
from .holds import HoldBook
from .inventory import Inventory
from .needs import Needs, drive_finder, secret_finder
from .schedule_book import ScheduleBook
from .scheduler import (
    ADMIT_RUN_COST,
    HOLDING,
    QUEUED,
    Admissions,
    AdmitRun,
    CancelRun,
    ClusterState,
    Decision,
    ImagePulling,
    LoseWorker,
    MachineBack,
    MachineLost,
    MachineUnreachable,
    MarkRun,
    MarkWorker,
    Observation,
    PlaceWorker,
    Quota,
    RequeueWorker,
    RestartRun,
    RunRecord,
    RunState,
    StartWorker,
    StopWorker,
    WorkerExited,
    WorkerReady,
    WorkerRecord,
    WorkerState,
    plan_tick,
)
from .scopes import DEFAULT, DEFAULT_SCOPE, Scope, run_key, scope_of, shown, workspace_of
from .store import BatchRecord, NameExists, NotFound, Store, TickWrite

__all__ = ["Engine", "Executor", "RunMeta"]

#: How many worker processes ``start_processes`` starts at most (the rest in the next calls,
#: which the executor asks for at once): a fork costs milliseconds.
SPAWN_SLICE = 32
#: How much admitting runs does in one step, in workers made (an array's copies, a group's
#: replicas), each run counting ``ADMIT_RUN_COST`` more; a run is admitted whole. The runs after
#: are admitted in the next steps, which the server's loop takes at once, after the routes
#: waiting for the engine (``Engine.more``). Measured here (2 cores), a run admitted costs about
#: 200 µs of a tick and a worker about 20 µs, and 25 µs more to write: a slice is about 12 ms, so
#: that a request waits for at most that. Before, one step admitted every run it found: 10,000
#: runs with 1.3 million array copies held the engine for 44 s, every request waiting. A slice
#: of 1,000 (50 ms) held each of a first apply's 20 batches for half a slice on average: 250
#: took 0.35 s off the apply of 10,000 runs (three pairs, 2026-12-04); 50 took no more off, its
#: steps' own cost growing.
ADMIT_SLICE = 250
#: More ticks than this at one instant means the scheduler does not settle: a bug, said loudly.
MAX_TICKS_PER_STEP = 10_000


class Executor(Protocol):
    def handle(self, d: Decision, state: ClusterState, now: float) -> None: ...

    def pop_due(self, now: float, *, ended: bool = True) -> list[Observation]:
        """The observations due at ``now``; ``ended=False``: only those the decisions made
        (what ended outside is looked for once a step, at its start)."""
        ...


@dataclass
class RunMeta:
    """What the API says about a run besides the scheduler's record."""

    document: dict[str, Any]
    resource_version: int
    created_at: float
    updated_at: float
    started_at: float | None = None
    finished_at: float | None = None


class Engine:
    def __init__(
        self, store: Store, inventory: Inventory, executor: Executor, now: float, cluster: str = DEFAULT
    ) -> None:
        self.store, self.inventory, self.executor, self.cluster = store, inventory, executor, cluster
        #: why drives cannot be mounted by this executor (``ProcessExecutor.no_sandbox``), or None
        self.no_sandbox: str | None = getattr(executor, "no_sandbox", None)
        #: held while the executor is used (a step, or ``start_processes`` outside the API's
        #: gate): a step a route asks for (``cancel``) waits for a slice of starts to end
        self._executing = threading.RLock()
        store.save_inventory(inventory, cluster)
        runs, workers, procs = store.load()
        runs = [r for r in runs if scope_of(r.name).cluster == cluster]
        kept = {r.name for r in runs}
        workers = [w for w in workers if w.run in kept]
        procs = {w.name: procs[w.name] for w in workers}
        self.meta: dict[str, RunMeta] = {}
        #: each scope's run keys, in submission order
        self.by_scope: dict[Scope, dict[str, None]] = {}
        for row in store.run_rows():
            if row["name"] not in kept:
                continue
            self.by_scope.setdefault(scope_of(row["name"]), {})[row["name"]] = None
            self.meta[row["name"]] = RunMeta(
                json.loads(row["document"]),
                row["resource_version"],
                row["created_at"],
                row["updated_at"],
                row["started_at"],
                row["finished_at"],
            )
        self.processes: dict[str, dict[str, Any]] = procs
        self._pending_observations: list[Observation] = []
        #: the GPUs' holds open now (GPU-hours: ``holds``)
        self.holds = HoldBook(store.open_holds(cluster))
        self.recovered = self._recover(runs, workers, procs, now)
        self.state = ClusterState(
            inventory, {r.name: r for r in runs}, {w.name: w for w in workers}, no_sandbox=self.no_sandbox
        )
        for q in store.quota_rows(cluster):
            self.state.set_quota(f"{q['org']}/{q['workspace']}", Quota(q["gpus"], q["runs"]))
        #: what a run names that must exist before it starts (a drive, a secret: ``needs``)
        self.needs = Needs([drive_finder(store.drive_rows), secret_finder(store.secret_names)])
        #: the runs on a schedule, and the runs they made (``schedule_book``)
        self.schedules = ScheduleBook(self)
        #: the GPU-hour budgets on this cluster, and what each has spent (``budgets``)
        self.budgets = BudgetBook(store, cluster, now)
        self.decisions = 0
        #: The last step left runs to admit (``ADMIT_SLICE``): the next one is wanted at once.
        self.more = False
        #: bumped by every change to any run (created, updated, deleted, its state moved): what
        #: the API keeps its run listings by
        self.generation = 0
        self.recheck()

    # -- start-up ----------------------------------------------------------------------------

    def _recover(
        self, runs: list[RunRecord], workers: list[WorkerRecord], procs: dict[str, dict[str, Any]], now: float
    ) -> list[str]:
        """Workers that held machines when the last server ended: lost, or back in the queue."""
        kill = getattr(self.executor, "kill_orphan", None)
        touched_workers: list[WorkerRecord] = []
        events = []
        for w in workers:
            if w.state not in HOLDING:
                continue
            proc = procs.get(w.name) or {}
            killed = kill(proc.get("pid"), proc.get("pid_started")) if kill else False
            if w.state in (WorkerState.RUNNING, WorkerState.STALE):
                how = "was stopped" if killed else "was gone"
                w.state = WorkerState.DOWN
                w.reason = f"Lost: its process {how} when the control plane restarted"
                w.ended_at, w.settled, w.final = now, False, False
            else:
                w.state, w.reason, w.machine = WorkerState.PENDING, QUEUED, None
                w.not_before = None
            touched_workers.append(w)
            events.append(_event(now, w.run, w.name, "Recovered", w.state, w.reason, w.machine, None))
        holding = {w.run for w in workers if w.state in HOLDING}
        by_name = {r.name: r for r in runs}
        touched_runs = []
        for name in {w.run for w in touched_workers}:
            r = by_name.get(name)
            if r is not None and name not in holding:
                r.placed_at = None
                touched_runs.append(r)
        if touched_workers:
            holds = self.holds.changes(touched_workers, [], now, self.labels_of)
            self.store.commit_tick(TickWrite(now, [], touched_workers, touched_runs, events, {}, holds))
        return [w.name for w in touched_workers]

    # -- what runs wait for ----------------------------------------------------------------------

    def recheck(self, names: Sequence[str] | None = None) -> None:
        """Ask again what the runs not finished (or ``names``) wait for that does not exist yet
        (``needs``): at start, after a run is made, and after a drive or a secret is made or
        deleted."""
        s = self.state
        self.schedules.note(s.runs if names is None else names)
        seen: dict[tuple[int, str], Any] = {}  # each workspace's drives and secrets, read once
        for name in s.runs if names is None else names:
            r = s.runs.get(name)
            if r is None:
                continue
            waits = None if r.state in FINAL_RUN_STATES else self.needs.waits(r.run, workspace_of(name), seen)
            if waits != s.waiting.get(name):
                s.set_waiting(name, waits)
                self.generation += 1

    def labels_of(self, name: str) -> dict[str, Any]:
        """Run ``name``'s labels, as its document gives them."""
        meta = self.meta.get(name)
        labels = meta.document.get("metadata", {}).get("labels") if meta is not None else None
        return dict(labels or {})

    # -- workspaces ----------------------------------------------------------------------------

    def runs_of(self, scope: Scope) -> list[str]:
        """The keys of ``scope``'s runs, in submission order."""
        return list(self.by_scope.get(scope, ()))

    def set_quota(self, workspace: str, quota: Quota | None) -> None:
        """Give ``ORG/WORKSPACE``'s quota on this cluster to the scheduler (``None``: lift it)."""
        self.state.set_quota(workspace, quota)
        self.generation += 1

    def usage(self, workspace: str) -> tuple[int, int]:
        """What ``ORG/WORKSPACE`` holds on this cluster now: GPUs, and runs holding machines."""
        return self.state.ws_gpus[workspace], self.state.ws_runs[workspace]

    # -- API writes --------------------------------------------------------------------------

    def submit(
        self,
        document: dict[str, Any],
        now: float,
        scope: Scope = DEFAULT_SCOPE,
        audit: tuple[Sequence[Mapping[str, Any]], int] | None = None,
    ) -> RunRecord:
        """Queue a new run (a validated document) of ``scope``, with ``audit`` its audit events:
        one transaction. ``NameExists`` when the scope has a run of that name."""
        run = Run.model_validate(document)
        name = run_key(scope, run.metadata.name)
        if name in self.state.runs:
            raise NameExists(f"a run named {run.metadata.name} exists")
        record = self.state.submit(run, now, name)
        stored = _stored(document)
        try:
            rv = self.store.create_run(record, stored, now, audit)
        except BaseException:  # whatever failed, the run queued goes, and it is raised again
            self._rebuild(without={name})
            raise
        self.meta[name] = RunMeta(stored, rv, now, now)
        self.by_scope.setdefault(scope, {})[name] = None
        self.generation += 1
        self.recheck([name])
        return record

    def submit_batch(
        self,
        documents: list[dict[str, Any]],
        now: float,
        record: BatchRecord | None = None,
        scope: Scope = DEFAULT_SCOPE,
        models: list[Run] | None = None,
        audit: tuple[Sequence[Mapping[str, Any]], int] | None = None,
    ) -> list[int]:
        """Queue new runs of ``scope`` (validated documents of distinct names; ``models``: their
        ``Run`` models, when made already) and, with ``record``, their inventory entries, with
        ``audit`` their audit events: ONE transaction (``Store.create_runs``); each run's
        resource_version. ``NameExists`` on a
        clash, and the store's errors, leave nothing queued."""
        added: list[tuple[RunRecord, dict[str, Any]]] = []
        try:
            for k, document in enumerate(documents):
                run = models[k] if models is not None else Run.model_validate(document)
                name = run_key(scope, run.metadata.name)
                if name in self.state.runs:
                    raise NameExists(f"a run named {run.metadata.name} exists")
                added.append((self.state.submit(run, now, name), _stored(document)))
            versions = self.store.create_runs(added, now, record, audit)
        except BaseException:  # whatever failed, the runs queued so far go, and it is raised again
            self._rebuild(without={r.name for r, _ in added})
            raise
        for (r, stored), rv in zip(added, versions, strict=True):
            self.meta[r.name] = RunMeta(stored, rv, now, now)
            self.by_scope.setdefault(scope, {})[r.name] = None
        self.generation += 1
        self.recheck([r.name for r, _ in added])
        return versions

    def update(self, name: str, document: dict[str, Any], expected: int | None, now: float) -> int:
        """Change a run in place (``expected``: the resource_version read); its new resource_version.

        Only the fields the spec layer lets change in place may differ (``validate_update``):
        any other is ``InvalidSpec``, one error per field, and nothing is written."""
        record = self.state.runs.get(name)
        if record is None:
            raise NotFound(f"no run named {shown(name)}")
        run = Run.model_validate(document)
        stored = _stored(document)
        refused = validate_update(normalize(self.meta[name].document), normalize(stored))
        if refused:
            raise InvalidSpec(refused)
        rv = self.store.update_run(name, stored, expected, now)
        self.state.replace_spec(name, run)
        meta = self.meta[name]
        meta.document, meta.resource_version, meta.updated_at = stored, rv, now
        self.generation += 1
        return rv

    def cancel(self, name: str, now: float) -> None:
        """Cancel a run now: its workers are stopped (processes killed) within this call."""
        record = self.state.runs.get(name)
        if record is None:
            raise NotFound(f"no run named {shown(name)}")
        if record.state not in FINAL_RUN_STATES:
            self.observe(CancelRun(name), now)
            self.step(now)

    def delete(
        self, name: str, now: float, audit: tuple[Sequence[Mapping[str, Any]], int] | None = None
    ) -> None:
        """Cancel a run (its processes are stopped now) and delete it, with ``audit`` recording
        its audit events in the same transaction."""
        self.cancel(name, now)
        self.store.delete_run(name, audit)
        self.meta.pop(name, None)
        self.by_scope.get(scope_of(name), {}).pop(name, None)
        self._rebuild(without={name})
        self.generation += 1

    def rerun(self, name: str, *, failed: bool, now: float) -> RunRecord:
        """A finished run runs again: whole, or (``failed``) its failed copies in a new array
        (``reconciler.controlplane.rerun``, where the rules are)."""
        from .rerun import rerun

        made = rerun(self, name, failed=failed, now=now)
        self.recheck([made.name])
        return made

    def observe(self, event: Observation, now: float) -> None:
        """Record an observation from outside the executor (a cancel); the next step acts on it."""
        self.state.observe(event, now)
        self._pending_observations.append(event)
        self.generation += 1

    def _rebuild(self, without: Collection[str] = ()) -> None:
        """Re-index the scheduler's state from its records (after a spec changed or a run went),
        ``without`` those runs and their workers (the one rollback of a submit that failed)."""
        s = self.state
        runs = {n: r for n, r in s.runs.items() if n not in without}
        workers = {n: w for n, w in s.workers.items() if w.run not in without}
        self.state = ClusterState(self.inventory, runs, workers, no_sandbox=self.no_sandbox)
        self.state.carry_over(s)

    # -- the tick ----------------------------------------------------------------------------

    def start_processes(self) -> int:
        """Start the processes of a slice of the released workers (``SPAWN_SLICE``, the
        executor's ``spawn``); how many. Touches the executor only, never the state or the
        store: the server calls it between steps, while routes use the engine."""
        spawn = getattr(self.executor, "spawn", None)
        if spawn is None:
            return 0
        with self._executing:
            return int(spawn(SPAWN_SLICE))

    def step(self, now: float, *, start: bool = True) -> int:
        """One tick at ``now``, settled, written in one transaction; how many decisions it made.
        The schedules' runs due are made first (``schedule_book``: their own transactions).
        ``start``: a slice of the released workers' processes is started within the step
        (``start_processes``), their facts written with it; the server starts them after the
        step instead, outside the API's gate, and the next step writes their facts."""
        with self._executing:
            return self._step(now, start)

    def _step(self, now: float, start: bool) -> int:
        self.schedules.tick(now)
        s = self.state
        s.spent = self.budgets.spent(now, self.holds)
        log = _TickLog(self, now)
        pending, self._pending_observations = self._pending_observations, []
        for o in pending:
            log.observed(o)
        for o in self.executor.pop_due(now):
            s.observe(o, now)
            log.observed(o)
        made = 0
        admissions = Admissions(ADMIT_SLICE, ADMIT_RUN_COST)
        for _ in range(MAX_TICKS_PER_STEP):
            decisions = plan_tick(s, now, admissions=admissions)
            if decisions:
                s.apply(decisions, now)
                log.decided(decisions)
                for d in decisions:
                    self.executor.handle(d, s, now)
                made += len(decisions)
            due = self.executor.pop_due(now, ended=False)
            for o in due:
                s.observe(o, now)
                log.observed(o)
            if not decisions and not due:
                break
        else:
            raise RuntimeError(f"the scheduler did not settle at {now}")
        self.more = admissions.cut
        if start:
            self.start_processes()
        drain = getattr(self.executor, "drain_facts", None)
        facts = drain() if drain else {}
        for name, f in facts.items():
            self.processes.setdefault(name, {}).update(f)
            log.workers.setdefault(name, None)
        if log.runs or log.workers or log.events:
            self.store.commit_tick(log.write(facts))
            self.generation += 1
        self.decisions += made
        return made

    def next_wakeup(self, now: float) -> float | None:
        """When the next timer (a backoff, a barrier, a time limit, a GPU-hour budget reached or
        its period turned, a schedule's time) is due; ``None``: none is."""
        timers = (self.state.next_wakeup(now), self.budgets.next_change(), self.schedules.next_wakeup())
        due = [t for t in timers if t is not None]
        return min(due) if due else None


class _TickLog:
    """What a tick touched, collected as it goes: runs, workers, new workers, events."""

    def __init__(self, engine: Engine, now: float) -> None:
        self.engine, self.now = engine, now
        self.runs: dict[str, None] = {}
        self.workers: dict[str, None] = {}
        self.new: dict[str, None] = {}
        self.events: list[dict[str, Any]] = []

    def _worker(self, name: str) -> WorkerRecord | None:
        w = self.engine.state.workers.get(name)
        if w is not None:
            self.workers[name] = None
            self.runs[w.run] = None
        return w

    def observed(self, o: Observation) -> None:
        s = self.engine.state
        if isinstance(o, ImagePulling | WorkerReady | WorkerExited):
            w = self._worker(o.worker)
            if w is not None:
                code = o.exit_code if isinstance(o, WorkerExited) else None
                self.events.append(
                    _event(self.now, w.run, w.name, type(o).__name__, w.state, w.reason, w.machine, code)
                )
        elif isinstance(o, CancelRun):
            self.runs[o.run] = None
            self.events.append(
                _event(self.now, o.run, None, "CancelRun", None, "Cancelled by a user", None, None)
            )
        elif isinstance(o, MachineLost | MachineUnreachable | MachineBack):
            for name in s.on_machine.get(o.machine, ()):
                self._worker(name)
            for name, w in s.workers.items():
                if w.machine == o.machine and w.state is WorkerState.DOWN:
                    self._worker(name)

    def decided(self, decisions: list[Decision]) -> None:
        s, now = self.engine.state, self.now
        for d in decisions:
            if isinstance(d, AdmitRun):
                self.runs[d.run] = None
                for n in d.workers:
                    self.new[n.name] = None
                self.events.append(
                    _event(now, d.run, None, "AdmitRun", None, f"{d.start}, {d.on_failure}", None, None)
                )
            elif isinstance(d, MarkRun | RestartRun):
                self.runs[d.run] = None
                r = s.runs[d.run]
                self.events.append(_event(now, d.run, None, type(d).__name__, r.state, d.reason, None, None))
            elif isinstance(
                d, PlaceWorker | StartWorker | StopWorker | RequeueWorker | MarkWorker | LoseWorker
            ):
                if isinstance(d, PlaceWorker) and d.new is not None:
                    self.new[d.new.name] = None
                w = self._worker(d.worker)
                assert w is not None
                code = w.exit_code if isinstance(d, MarkWorker) else None
                self.events.append(
                    _event(now, w.run, w.name, type(d).__name__, w.state, w.reason, w.machine, code)
                )

    def write(self, facts: dict[str, dict[str, Any]]) -> TickWrite:
        s = self.engine.state
        new = [s.workers[n] for n in self.new if n in s.workers]
        workers = [s.workers[n] for n in self.workers if n in s.workers and n not in self.new]
        runs = [s.runs[n] for n in self.runs if n in s.runs]
        meta = self.engine.meta
        for r in runs:
            m = meta.get(r.name)
            if m is None:
                continue
            m.updated_at = self.now
            if r.running_since is not None and m.started_at is None:
                m.started_at = r.running_since
            if r.state in FINAL_RUN_STATES:
                m.finished_at = self.now
        holds = self.engine.holds.changes([*new, *workers], runs, self.now, self.engine.labels_of)
        return TickWrite(self.now, new, workers, runs, self.events, facts, holds)


def _event(
    at: float,
    run: str,
    worker: str | None,
    kind: str,
    state: WorkerState | RunState | None,
    reason: str | None,
    machine: str | None,
    exit_code: int | None,
) -> dict[str, Any]:
    return {
        "at": at,
        "run": run,
        "worker": worker,
        "kind": kind,
        "state": str(state) if state is not None else None,
        "reason": reason,
        "machine": machine,
        "exit_code": exit_code,
    }


def _stored(document: dict[str, Any]) -> dict[str, Any]:
    """The document as kept: metadata and spec as given, less the server-owned resource_version."""
    meta = {k: v for k, v in document.get("metadata", {}).items() if k != "resource_version"}
    return {"metadata": meta, "spec": document["spec"]}
