"""The scheduler's records and its closed sets of decisions and observations: plain data.

Owns: ``RunRecord`` and ``WorkerRecord`` (the rows a store keeps), ``NewWorker`` (a worker as
created), ``Free`` (what a machine has free), ``Quota`` (what a workspace may hold), ``Ask``
and ``ask_of`` (what one worker needs on its machine), ``StopCause``, which worker states hold
a machine (``HOLDING``) and which have ended (``ENDED``), the decisions a tick returns
(``Decision``: a closed union) and the observations an executor or a user reports
(``Observation``: a closed union).

Must not touch: the indexes over the records (``state``), placement, clocks, I/O. States, final
states and reasons are the vocabulary's (``reconciler.runspec.vocabulary``), never restated here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from reconciler.runspec.models import OnFailure, Run, StartPolicy, TaskTemplate
from reconciler.runspec.vocabulary import QUEUED, RunState, WorkerState

from ..inventory import Machine

__all__ = [
    "ENDED",
    "HOLDING",
    "AdmitRun",
    "Ask",
    "CancelRun",
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
    "StartWorker",
    "StopCause",
    "StopWorker",
    "WorkerExited",
    "WorkerReady",
    "WorkerRecord",
    "ask_of",
]


# ---- why a worker is stopped; which worker states hold a machine, which have ended ----------


class StopCause(StrEnum):
    """Why the scheduler stops a worker (``StopWorker.cause``); the executor kills it the same way."""

    TIME_LIMIT = "TimeLimit"
    PREEMPTED = "Preempted"
    RUN_FAILED = "RunFailed"
    RUN_RESTART = "RunRestart"
    BARRIER = "Barrier"
    CANCELLED = "Cancelled"


#: Worker states that hold a place on a machine (GPUs, cores, memory).
HOLDING = frozenset(
    {WorkerState.PREPARING, WorkerState.PULLING, WorkerState.READY, WorkerState.RUNNING, WorkerState.STALE}
)
#: Worker states of a worker that has ended (for now: it may be requeued).
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


# ---- what one machine has free ---------------------------------------------------------------


@dataclass(slots=True)
class Free:
    """What one machine has free: healthy GPUs, unhealthy ones (any GPU an ask that is not
    ``healthy_only`` may take), CPU cores and memory.

    Mutable: the state changes its own in place as workers take and give room
    (``ClusterState.free``); a tick's view copies one before it lays a change over it
    (``placement.View``). Compared by value.
    """

    healthy_gpus: int
    unhealthy_gpus: int
    cpu_cores: int
    memory_bytes: int

    @staticmethod
    def of(m: Machine) -> Free:
        """All of ``m`` free."""
        return Free(m.healthy, m.gpus - m.healthy, m.cpu_cores, m.memory_bytes)

    @property
    def gpus(self) -> int:
        """Free GPUs, healthy or not."""
        return self.healthy_gpus + self.unhealthy_gpus

    def copy(self) -> Free:
        return Free(self.healthy_gpus, self.unhealthy_gpus, self.cpu_cores, self.memory_bytes)

    def take(self, healthy_gpus: int, unhealthy_gpus: int, cpu_cores: int, memory_bytes: int) -> None:
        """Less free by so much (negative amounts: more)."""
        self.healthy_gpus -= healthy_gpus
        self.unhealthy_gpus -= unhealthy_gpus
        self.cpu_cores -= cpu_cores
        self.memory_bytes -= memory_bytes


# ---- a workspace's quota ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Quota:
    """What a workspace may hold on a cluster at once: GPUs, and runs holding machines (``None``:
    no limit). The scheduler never places a worker that would take the workspace past either."""

    gpus: int | None = None
    runs: int | None = None


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
    """A worker as the scheduler (and a store's row) keeps it: its ask, place, state and restarts."""

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
    #: Why it last went back to the queue (``RestartReason``), ``None`` before its first restart:
    #: its ``ASTRAEUS_RESTART_REASON``.
    restart_reason: str | None = None
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
    """A run as the scheduler (and a store's row) keeps it: its spec, policies, state and restarts."""

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


@dataclass(frozen=True, slots=True)
class LoseWorker:
    """A Stale worker counted as lost: Down, with ``reason``; the restart rules then apply to it
    as to any lost worker. Its machine still holds nothing new until it reports again."""

    worker: str
    reason: str


Decision = (
    AdmitRun
    | MarkRun
    | RestartRun
    | PlaceWorker
    | StartWorker
    | StopWorker
    | RequeueWorker
    | MarkWorker
    | LoseWorker
)


# ---- observations (what an executor or a user reports) -------------------------------------------


@dataclass(frozen=True, slots=True)
class ImagePulling:
    """The worker's machine started pulling its image (``WorkerReady`` says when it is done)."""

    worker: str


@dataclass(frozen=True, slots=True)
class WorkerReady:
    """The worker is prepared, its image pulled: it may start."""

    worker: str


@dataclass(frozen=True, slots=True)
class WorkerExited:
    """A worker's process ended with ``exit_code``; ``reason``: why, when it never started."""

    worker: str
    exit_code: int
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class MachineUnreachable:
    """The machine stopped reporting: its workers are Stale, and nothing new goes there."""

    machine: str


@dataclass(frozen=True, slots=True)
class MachineLost:
    """The machine is known lost: its workers are Down at once."""

    machine: str


@dataclass(frozen=True, slots=True)
class MachineBack:
    """The machine reports again: its Stale workers are as they were, and it takes work again."""

    machine: str


@dataclass(frozen=True, slots=True)
class CancelRun:
    run: str


Observation = (
    ImagePulling | WorkerReady | WorkerExited | MachineUnreachable | MachineLost | MachineBack | CancelRun
)
