"""The embedded control plane's scheduler: pure decisions from state, time and inventory.

Owns: the records the scheduler reads (``RunRecord``, ``WorkerRecord``: the rows a sqlmodel store
keeps), the decisions it returns, the observations an executor reports, placement (shapes over
the network levels), start policies, restarts and backoff, arrays, priorities, preemption and
backfill, and each worker's environment. States, final states, reasons and the restart numbers
are the vocabulary's (``reconciler.runspec.vocabulary``); they are re-exported here for callers.

Must not touch: clocks (``now`` is an argument), I/O, randomness, processes, the store. ``plan_tick``
and ``schedule`` only read the records (a tick keeps what it learned in the state's caches, which
change no decision: ``quiet``); ``ClusterState.apply`` / ``observe`` are the one place records
change, written so a store can do the same with rows (the simulation and the engine call them).

The modules, in layers: each imports only the layers below it, imports for type checking too
(import-linter's contract "the scheduler reads downward", ``pyproject.toml``); modules of one
row know nothing of each other. Each says what it owns and must not touch:

==============================  ===================================================================
outlook                         ``outlook``: what a copy of the state, ticked, says of new runs
tick                            ``plan_tick`` (the phases in order) and ``schedule``
queue                           the placement phase: runs served by priority, then submission
passover                        whether a run the memo kept may be passed over this tick
priorities | runstates          backfill and preemption | cancellations, the runs' states
admission | gangs               a run's first look | the gang barrier, starts, ``start_after``
restarts | quotas               ended workers, job restarts, backoff, time limits | quotas
ticking                         ``Tick``: one tick's working state, which the phases share
netgroups | exceeds             a constrained run's network group | cores or memory past any machine
placement                       the tick's view of free room, network levels, shapes, ``Memo``
restarting | dependencies       a restarting run's reason | ``depends_on``
arrays | env | exitcodes        an array's copies and cap | a worker's environment | exit rules
state                           ``ClusterState``: the records, their indexes, ``apply``, ``observe``
quiet                           ``Quiet``: the memo of quiet runs the state keeps across ticks
records                         the records, ``Free``, ``Ask``, ``Quota``; ``Decision``,
                                ``Observation``
==============================  ===================================================================

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
LoseWorker        a worker Stale for ``STALE_TIMEOUT_SECONDS`` is Down, counted as lost
================  ==========================================================================

Observations (closed set, ``Observation``): ``ImagePulling`` (Preparing → Pulling, ``Pulling image
IMAGE``), ``WorkerReady`` (Preparing or Pulling → ReadyToStart), ``WorkerExited``,
``MachineUnreachable`` (its workers Stale; it takes no new worker), ``MachineLost`` (its workers
Down), ``MachineBack`` (Stale workers as they were; it takes work again), ``CancelRun``.

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
* Stale: a worker whose machine stopped reporting keeps its place for ``STALE_TIMEOUT_SECONDS``
  (5 minutes); then it is Down (``Machine M stopped reporting 5 min ago; counted as lost``) and
  restarted as a lost worker is. Its machine takes no new worker until it reports again.
* Backfill: runs are served by priority, then submission. After the first run blocked for room,
  a later run may start only if every worker states a time limit and it would end before the
  blocked run could start (its start estimated from the running workers' time limits).
* Preemption: only of strictly lower priority; a preempted worker goes back to the queue with its
  restart count untouched (a gang's or RestartJob run's other workers go back with it).
* Gangs with ``task_groups`` place and start every group together; ``start_after`` orders groups
  of non-gang runs only.
* Array copies get no MASTER_ADDR: they are independent.
* Quotas: a workspace's runs (keyed ``ORG/WORKSPACE/CLUSTER/NAME``, ``scopes``) never hold more
  GPUs, or more runs holding machines, than its quota. A run or copy that would pass it waits
  with ``Workspace W is at its quota of N GPUs`` (an array's cap is said first: ``max_parallel``
  holds a copy before the quota does), holds back no run queued behind it, and never preempts:
  preemption is tried only for what the quota allows. A reason names another workspace's run
  only by its workspace.
* ``network.interconnect`` and ``topology.keep_within``: the workers holding places at once are on
  one machine or within one group (an NVLink domain, fabric, RDMA network or rack they all share;
  a machine with no fabric is on none: missing levels never match), chosen for the whole run
  before its first worker is placed, under every start policy (``netgroups``).
"""

from __future__ import annotations

from reconciler.runspec.vocabulary import (
    BACKOFF_MAX_SECONDS,
    BACKOFF_START_SECONDS,
    CANCELLED_BY_USER,
    CONTAINER_RUNNING,
    FINAL_RUN_STATES,
    QUEUED,
    RESET_AFTER_SECONDS,
    RESTART_LIMIT,
    STALE_TIMEOUT_SECONDS,
    RunState,
    WorkerState,
    array_cap,
    backoff_seconds,
    exited,
    readout,
)

from .env import worker_env

# every search for room calls ``_shape`` through this package (``placement.search``), so that
# a test counting the searches can replace it here
from .placement import shape as _shape  # noqa: F401 (read through the package, not here)
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
    StopCause,
    StopWorker,
    WorkerExited,
    WorkerReady,
    WorkerRecord,
    ask_of,
)
from .state import ClusterState
from .tick import plan_tick, schedule
from .ticking import ADMIT_RUN_COST, Admissions

__all__ = [
    "ADMIT_RUN_COST",
    "BACKOFF_MAX_SECONDS",
    "BACKOFF_START_SECONDS",
    "CANCELLED_BY_USER",
    "CONTAINER_RUNNING",
    "ENDED",
    "FINAL_RUN_STATES",
    "HOLDING",
    "QUEUED",
    "RESET_AFTER_SECONDS",
    "RESTART_LIMIT",
    "STALE_TIMEOUT_SECONDS",
    "Admissions",
    "AdmitRun",
    "Ask",
    "CancelRun",
    "ClusterState",
    "Decision",
    "Free",
    "ImagePulling",
    "LoseWorker",
    "MachineBack",
    "MachineLost",
    "MachineUnreachable",
    "MarkRun",
    "MarkWorker",
    "NewWorker",
    "Observation",
    "PlaceWorker",
    "Quota",
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
    "array_cap",
    "ask_of",
    "backoff_seconds",
    "exited",
    "plan_tick",
    "readout",
    "schedule",
    "worker_env",
]
