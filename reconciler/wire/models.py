"""Every request and response of the control plane's REST API, as pydantic models (CONTRACT §5).

Owns the shapes, and nothing else: the API declares these as its routes' request and response
models (so ``/openapi.json`` is generated from them), builds its answers from them, and the
client's pydantic-free decoders (``reconciler.clusters.http``) are held equal to them by tests.
Must not touch: HTTP, the store, the scheduler; the words of states and reasons are the spec
layer's (``reconciler.runspec.vocabulary``), the run document's fields its models'.

Two kinds of model:

* ``Answer``: what the server sends. Every field is always sent (``null`` where it says so), and
  the published schema marks each one required; a client ignores fields it does not know.
* ``RequestBody``: a body a client sends, read strictly (``true`` is no number, ``"1"`` no integer;
  ``3.0`` is one where a field is ``Integral``, as JSON Schema has it); a field left out keeps its
  default. A run document (``RunDocument``) is the exception: it is the spec layer's ``Run``, and
  it is checked by ``validate_data``, whose messages are the 422's.

At a glance (``→`` an answer)::

    runs       POST/PUT RunDocument → Run;  GET /runs → RunList | RunSummaryList (?view=summary)
               | briefs.RunBriefList (?view=brief);  ?depends_on= ?rerun_of= filter any view
    workers    GET /runs/{name}/workers → WorkerList;  GET /workers → WorkerPage (?run= ?state=
               ?limit= ?continue=);  GET /workers/{worker} → Worker;  …/logs → text/plain
               (?attempt= ?since= ?tail=)
    events     GET /runs/{name}/events → EventList | EventTail (?tail=);  GET /machines →
               MachineList;  GET /info → Info
    sources    GET → SourceState | SourceList;  PUT SourceWrite → SourceState
               GET …/runs → SourceRuns | SourceDigests (?view=digest)
               PUT …/runs/{run} InventoryEntryWrite, PUT …/status SourceStatus,
               POST …/history ApplyRecord → Written;  POST …/lock LockRequest → Lock
               PUT …/hook HookSecret;  GET …/hook → HookState;  POST …/hook (signed) → HookState
    errors     Problems (422 of a body), Detail (401, 403, 404, 503, 422 of a parameter),
               StaleDetail and LockHeld (409)
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, RootModel

from ..runspec.models import Metadata
from ..runspec.models import Run as RunDocument
from ..runspec.vocabulary import HISTORY_KEEP, RunState, WorkerState

__all__ = [
    "LOGS_CONTENT",
    "LOGS_SINCE",
    "LOGS_TAIL",
    "Answer",
    "ApplyRecord",
    "Counter",
    "Detail",
    "Event",
    "EventList",
    "EventTail",
    "Health",
    "HookSecret",
    "HookState",
    "Info",
    "Integral",
    "InventoryDigest",
    "InventoryEntry",
    "InventoryEntryWrite",
    "Lock",
    "LockHeld",
    "LockRequest",
    "Machine",
    "MachineList",
    "Problem",
    "Problems",
    "RequestBody",
    "RerunRequest",
    "Run",
    "RunDocument",
    "RunList",
    "RunMetadata",
    "RunStatus",
    "RunSummary",
    "RunSummaryList",
    "RunView",
    "RunWritten",
    "ScheduleStatus",
    "SourceDigests",
    "SourceList",
    "SourceRuns",
    "SourceRunsView",
    "SourceState",
    "SourceStatus",
    "SourceSuspension",
    "SourceWrite",
    "StaleDetail",
    "SuspendBody",
    "Suspension",
    "Worker",
    "WorkerList",
    "WorkerPage",
    "Written",
]

EPOCH = "seconds since the epoch"
#: What a lock's id may be: it travels in headers (``X-Astra-Lock``, a source's ``ETag``).
LOCK_ID_PATTERN = r"^[A-Za-z0-9._:@+=~-]{1,128}$"
#: The largest process id a lock may name (a ``pid_t``): a client checks whether it still runs.
PID_MAX = 2**31 - 1
#: The largest integer every JSON reader holds exactly (JavaScript's ``Number.MAX_SAFE_INTEGER``):
#: the bound of a counter a client sends back, as a ``resource_version``.
EXACT_INT_MAX = 2**53 - 1


class Answer(BaseModel):
    """What the server sends: every field always present (the schema marks each required)."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=True)


class RequestBody(BaseModel):
    """A body a client sends, read strictly; a field left out keeps its default."""

    model_config = ConfigDict(strict=True)


def _integral(value: Any) -> Any:
    """A float with no fraction (``3.0``) as the integer it is; anything else as it is."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


#: An integer a client sends: as JSON Schema has it, ``3.0`` is one too (``true`` and ``"3"`` are not).
Integral = Annotated[int, BeforeValidator(_integral)]
#: A counter a client sends back (a ``resource_version``): an ``Integral`` every JSON reader holds.
Counter = Annotated[int, Field(ge=0, le=EXACT_INT_MAX), BeforeValidator(_integral)]


# ---- errors and health -------------------------------------------------------------------------


class Problem(Answer):
    """One problem of a refused request."""

    path: str = Field(
        description="Where: the field's dotted path in the body (``spec.array.size``, "
        "``inventory.RUN.spec``, ``args[0]``), '' for the body itself, ``query.NAME`` or "
        "``header.NAME`` for a parameter."
    )
    message: str = Field(description="What, in words: for a run document, validate_data's message.")


class Problems(RootModel[list[Problem]]):
    """A 422's body: every problem found, not only the first."""


class Detail(Answer):
    """An error in words (401, 403, 404, 503; 409 with more below)."""

    detail: str


class StaleDetail(Detail):
    """409 on a write made against a stale ``resource_version``: the current one, to read again."""

    resource_version: int


class Health(Answer):
    """``GET /healthz`` (outside the API, no token): the server answers."""

    ok: bool


class Info(Answer):
    """``GET /info``: who this control plane is."""

    org: str
    workspace: str
    cluster: str
    executor: str = Field(description="How workers run: 'process' (local processes), 'simulated'.")
    schema_version: int = Field(description="The version of the store's database schema.")


class Machine(Answer):
    """One machine of the inventory, its state, and what is free on it now."""

    name: str
    state: str = Field(description="'Up', or 'Down' when it was lost.")
    gpus: int
    gpu_model: str
    gpu_memory_gb: float
    healthy_gpus: int | None = Field(description="GPUs passing their health checks; null: all.")
    cpu_cores: int
    memory_bytes: int
    nvlink_domain: str | None
    fabric: str | None = Field(description="The InfiniBand fabric the machine is on.")
    rack: str | None
    rdma_network: str | None
    free_gpus: int
    free_cpu_cores: int


class MachineList(Answer):
    items: list[Machine]


# ---- runs --------------------------------------------------------------------------------------


class RunMetadata(Metadata):
    """A run's metadata as the server answers it: as submitted, with its ``resource_version``.

    ``resource_version`` comes from one counter for the whole store: every change of any run's
    document (POST, PUT) takes its next value, so it only grows, across restarts and across a
    delete and re-create under the same name. The scheduler's changes of state do not touch it."""

    resource_version: int = Field(ge=0, description="Give it back unchanged in a PUT.")


class ScheduleStatus(Answer):
    """A run on a schedule (``spec.schedule``), as a CronJob's status: when it next makes a run."""

    cron: str
    timezone: str
    concurrency: str = Field(description="Forbid, Allow or Replace.")
    keep: int = Field(description="How many finished runs it made are kept.")
    suspended: bool
    suspended_at: float | None = Field(description=EPOCH)
    suspended_by: str | None
    next_at: float | None = Field(
        description=f"When it next makes a run ({EPOCH}); null: suspended or ended."
    )
    last_schedule_at: float | None = Field(description=f"The time of the last run it made ({EPOCH}).")
    last_successful_at: float | None = Field(description=f"When a run it made last completed ({EPOCH}).")
    active: list[str] = Field(description="The runs it made that have not ended.")


class RunStatus(Answer):
    """Where a run is: its state and reason in words, its times, its workers."""

    state: RunState
    reason: str = Field(description="Why, in the seeds' words ('' when there is nothing to say).")
    created_at: float | None = Field(description=EPOCH)
    started_at: float | None = Field(description=f"When its first worker started running ({EPOCH}).")
    finished_at: float | None = Field(description=EPOCH)
    workers: int = Field(description="How many workers it has (an array not admitted yet: its size).")
    workers_running: int
    gpus_held: int
    restarts: int
    readout: str = Field(description="``Workers R running of N``.")
    workspace: str
    url: str = Field(description="The run's own URL, under the long base path.")
    schedule: ScheduleStatus | None = Field(None, description="Its schedule; null: it has none.")


class Run(Answer):
    """A run (``RUN``): its document as submitted, and its status."""

    metadata: RunMetadata
    spec: dict[str, Any] = Field(description="The spec as submitted (a RunDocument's ``spec``).")
    status: RunStatus
    task_counts: dict[str, int] = Field(
        description='Workers by state: ``{"Completed": 41, "Pending": 51, "Running": 8}``.'
    )


class RunWritten(Run):
    """A run as ``POST /runs`` and ``PUT /runs/{name}`` answer it: with its document's warnings."""

    warnings: list[Problem] = Field(
        description="What is valid but likely not meant (a run without a time limit cannot backfill; "
        "an array's copies never get SLURM_ARRAY_TASK_ID; a command of one string with spaces): the "
        "words of astra validate's warnings."
    )


class RunList(Answer):
    """``GET /runs``: every run, in submission order."""

    items: list[Run]


class RunView(StrEnum):
    """What ``GET /runs`` answers: whole runs, summaries, or briefs (``wire.briefs``)."""

    SUMMARY = "summary"
    FULL = "full"
    BRIEF = "brief"


class RunSummary(Answer):
    """What a plan reads of a run whose digests agree: no document, about 100 bytes."""

    name: str
    resource_version: int
    state: RunState
    spec_digest: str | None = Field(
        description='"n2:" + the sha256 hex of the canonical JSON (keys sorted, no spaces, UTF-8) '
        "of reconciler.runspec.normalize.normalize({metadata, spec}) of the stored document; "
        "null when it has none."
    )


class RunSummaryList(Answer):
    """``GET /runs?view=summary``: every run's summary, in submission order."""

    items: list[RunSummary]


# ---- workers, events, logs ---------------------------------------------------------------------


class Worker(Answer):
    """One worker (``WORKER``): its place in its run, its state and reason, its attempt."""

    name: str = Field(description="``<run>-<rank>``, or ``<run>-<group>-<rank>``.")
    run: str
    rank: int = Field(description="Its ``RANK``: a rerun's copy, the original array's index.")
    group: str | None
    state: WorkerState
    reason: str
    machine: str | None = Field(description="Where it is placed; null while it waits.")
    exit_code: int | None
    restarts: int
    attempts: int
    gpus: int
    cpu_cores: int
    memory_bytes: int
    placed_at: float | None = Field(description=EPOCH)
    started_at: float | None = Field(description=f"When its current attempt started ({EPOCH}).")
    ended_at: float | None = Field(description=EPOCH)
    image: str | None


class WorkerList(Answer):
    """``GET /runs/{name}/workers``: the run's workers by rank, the readout, the counts."""

    items: list[Worker]
    readout: str = Field(description="``Workers R running of N``.")
    task_counts: dict[str, int]


class WorkerPage(Answer):
    """``GET /workers`` (= ``/tasks``): the workspace's workers, one page of them.

    Runs in submission order, each run's workers by rank. ``total`` and ``task_counts`` count
    every worker the filters match, on every page; ``continue`` (a token, or null on the last
    page) asks for the next page as ``?continue=TOKEN`` with the same filters and limit.
    """

    model_config = ConfigDict(json_schema_serialization_defaults_required=True, serialize_by_alias=True)

    items: list[Worker]
    total: int = Field(description="Workers matching the filters, on every page.")
    task_counts: dict[str, int] = Field(description="Their states, counted over every page.")
    #: ``continue`` on the wire (a Python keyword here)
    continue_: str | None = Field(
        serialization_alias="continue",
        validation_alias=AliasChoices("continue", "continue_"),
        description="The next page's token (``?continue=``); null: no more.",
    )


class Event(Answer):
    """One decision or observation of the scheduler, about a run or one of its workers."""

    at: float = Field(description=EPOCH)
    run: str
    worker: str | None
    kind: str = Field(description="'StartWorker', 'WorkerExited', 'Recovered', …")
    state: str | None
    reason: str | None
    machine: str | None
    exit_code: int | None


class EventList(Answer):
    items: list[Event]


class EventTail(EventList):
    """``GET /runs/{name}/events?tail=N``: the run's last N events, and how many it has."""

    total: int = Field(description="How many events the run has (the items are the last of them).")


#: ``GET /workers/{worker}/logs``: the output of its latest attempt (``?attempt=N``: of that one).
LOGS_CONTENT = {"text/plain": {"schema": {"type": "string", "description": "The worker's output."}}}
#: ``?since=T`` of the logs: what it means (the control plane knows when each line was written to
#: within about a second; a line that may have been written at T or later is sent).
LOGS_SINCE = (
    "Only the lines written at this time or later, in seconds since the epoch (a float: "
    "`date +%s.%N`). Each line is sent whole; one that may have been written at this time is sent."
)
#: ``?tail=N`` of the logs: only the end of the output is read.
LOGS_TAIL = "Only the last this many lines (after since), each ending at a newline (the last may not)."


# ---- sources -----------------------------------------------------------------------------------


_PROCESS = (
    "the process that took the lock (null: not told, as by an older astra): with its host and pid, "
    "its start (``TICKS/BOOT/NS``, reconciler.processes) tells a lock left by a dead apply from one held"
)


class Lock(Answer):
    """A source's apply lock: who holds it, since when, and the process that took it."""

    id: str
    owner: str = Field(description="``user@host:pid``.")
    created_at: float = Field(description=EPOCH)
    host: str | None = Field(None, description=f"The host of {_PROCESS}.")
    pid: int | None = Field(None, description="The pid of the process that took the lock.")
    started: str | None = Field(None, description="When the process that took the lock started.")


class LockHeld(Detail):
    """409: a source's lock stands in the way: the holder's lock, or null when none is held."""

    lock: Lock | None


class RerunRequest(RequestBody):
    """``POST /runs/{name}/rerun``: ``failed`` false (or the body left out): the finished run runs
    again whole, under its name; true: a new array ``<run>-rerun-<k>`` of only the copies that did
    not complete, each seeing its original index (``reconciler.runspec.rerun``)."""

    failed: bool = False


class LockRequest(RequestBody):
    """``POST /sources/{name}/lock``: who asks (left out: 'unknown'), the lock's id (left out:
    the server makes one), and the asking process (``host``, ``pid``, ``started``: kept with the
    lock). Other keys are ignored."""

    owner: str | None = None
    id: str | None = Field(
        default=None,
        pattern=LOCK_ID_PATTERN,
        description="Letters, digits and ``._:@+=~-``, at most 128: it travels in headers "
        "(X-Astra-Lock, the source's ETag).",
    )
    host: str | None = None
    pid: Annotated[int, Field(ge=1, le=PID_MAX), BeforeValidator(_integral)] | None = Field(
        default=None, description="A process id (a ``pid_t``)."
    )
    started: str | None = None


class InventoryEntryWrite(RequestBody):
    """A run a source applied, as it is written (``PUT /sources/{name}/runs/{run}``)."""

    spec: dict[str, Any] = Field(description="The last-applied run document (normalised).")
    applied_at: float = Field(description=EPOCH)
    file: str | None = Field(None, description="The file it came from (``examples/sweep.yaml``).")


class InventoryDigest(Answer):
    """An inventory entry without its spec (``?view=digest``)."""

    digest: str | None = Field(
        description="The digest of its normalised spec, made by the server as RunSummary's "
        "spec_digest is (equal documents, equal digests); null when it has none."
    )
    applied_at: float = Field(description=EPOCH)
    file: str | None


class InventoryEntry(InventoryDigest):
    """A run a source applied, as the server answers it: with its spec and the spec's digest."""

    spec: dict[str, Any] = Field(description="The last-applied run document (normalised).")


class SourceStatus(BaseModel):
    """A source's reconcile status, as its reconcile loop writes it (any object is kept)."""

    model_config = ConfigDict(extra="allow", strict=True)

    state: str | None = Field(None, description="'Ready', 'Reconciling' or 'Stalled'.")
    reason: str | None = Field(None, description="'ReconciliationSucceeded', 'ApplyFailed', …")
    message: str | None = None
    step: str | None = None
    revision: str | None = None
    observed_revision: str | None = None
    updated_at: float | None = Field(None, description=EPOCH)


class ApplyRecord(BaseModel):
    """One apply of a source (any object is kept; these are the keys astra writes)."""

    model_config = ConfigDict(extra="allow", strict=True)

    who: str | None = None
    when: float | None = Field(None, description=EPOCH)
    commit: str | None = None
    summary: dict[str, Integral] | None = Field(None, description='``{"create": 1, "noop": 3, …}``.')
    result: str | None = Field(None, description="'applied', or 'failed: …'.")


class SourceState(Answer):
    """A reconcile source's memory (``SOURCE``), kept with the cluster; any other keys a whole
    ``PUT`` gave are kept and answered too."""

    model_config = ConfigDict(extra="allow")

    name: str
    resource_version: int = Field(description="1 at its first write, one more with each write.")
    lock: Lock | None
    status: SourceStatus
    history: list[ApplyRecord] = Field(description=f"Oldest first, the newest {HISTORY_KEEP} kept.")
    inventory: dict[str, InventoryEntry] = Field(description="Each run it applied, by name.")


class SourceList(Answer):
    items: list[SourceState]


class SourceWrite(RequestBody):
    """``PUT /sources/{name}``: the whole state at once (astra itself writes granularly)."""

    model_config = ConfigDict(strict=True, extra="allow")

    resource_version: Counter | None = Field(
        None, description="The one read: 0, or left out, on the first write (create)."
    )
    inventory: dict[str, InventoryEntryWrite] | None = None
    status: SourceStatus | None = None
    history: list[ApplyRecord] | None = Field(None, description=f"The newest {HISTORY_KEEP} are kept.")
    lock_id: str | None = Field(None, description="As X-Astra-Lock: only when given.")


class SourceRunsView(StrEnum):
    """What ``GET /sources/{name}/runs`` answers: entries with their specs, or digests only."""

    DIGEST = "digest"
    FULL = "full"


class SourceRuns(Answer):
    """``GET /sources/{name}/runs``: its inventory, by run."""

    name: str
    resource_version: int
    items: dict[str, InventoryEntry]


class SourceDigests(Answer):
    """``GET /sources/{name}/runs?view=digest``: its inventory without specs (none is read)."""

    name: str
    resource_version: int
    items: dict[str, InventoryDigest]


class HookSecret(RequestBody):
    """``PUT /sources/{name}/hook``: the secret that signs the source's webhook calls."""

    secret: str = Field(min_length=16, description="At least 16 characters; kept by the server in memory.")


class HookState(Answer):
    """A source's webhook: how many signed calls it took since the server started."""

    name: str
    count: int = Field(description="Signed calls accepted since the server started (a watch compares).")
    secret_set: bool = Field(description="Whether a secret is set: without one every call is refused.")


class SuspendBody(RequestBody):
    """``PUT /sources/{name}/suspend``: who suspends the source, and why."""

    by: str = Field(
        "", max_length=200, description="Who, for people (``user@host``); the token's name if empty."
    )
    reason: str = Field("", max_length=500, description="Why, in words: said in the source's status.")


class Suspension(Answer):
    """A source's suspension, kept in its status under ``suspended``."""

    by: str
    at: float = Field(description=EPOCH)
    reason: str


class SourceSuspension(Answer):
    """``GET``/``PUT``/``DELETE /sources/{name}/suspend``: the source's suspension (``null``: none)."""

    name: str
    suspended: Suspension | None


class Written(Answer):
    """The answer to a granular write: the source's new ``resource_version`` (ETag: its tag)."""

    name: str
    resource_version: int
