"""The words every part of astra shares about a run: one place for each fact.

Owns: run and worker states (and which are final), the reasons the scheduler gives in words,
the restart rules of the seeds (the limit, the backoff, when the count resets), which fields
of a run change in place and which force a replace (``forces_replace``, ``validate_update``),
how many apply records a source keeps, and equality as documents mean it (``same``).

Read by the plan, the control plane's scheduler, store and API, the Slurm cluster, the CLI and
the docs; nothing else restates them. Must not touch: pydantic, I/O, clocks: these are plain
values and pure functions, cheap to import anywhere.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from enum import StrEnum
from typing import Any

from . import messages as msg
from .errors import FieldError
from .paths import FieldPath
from .quantities import format_duration

__all__ = [
    "BACKOFF_MAX_SECONDS",
    "BACKOFF_START_SECONDS",
    "CANCELLED_BY_USER",
    "CONTAINER_RUNNING",
    "DRIVES_NEED_SANDBOX",
    "FINAL_RUN_STATES",
    "HISTORY_KEEP",
    "IN_PLACE_FIELDS",
    "QUEUED",
    "RESET_AFTER_SECONDS",
    "RESTART_LIMIT",
    "STALE_TIMEOUT_SECONDS",
    "RunState",
    "WorkerState",
    "all_completed",
    "array_cap",
    "backoff_seconds",
    "changed_paths",
    "completion_restart_reason",
    "exited",
    "forces_replace",
    "lost_after_stale",
    "machine_lost",
    "next_restart",
    "no_restarts_left",
    "pulling",
    "quota_gpus",
    "quota_runs",
    "readout",
    "restart_reason",
    "same",
    "stale",
    "time_limit_reason",
    "validate_update",
    "worker_failed_on",
]


# ---- states ------------------------------------------------------------------------------------


class RunState(StrEnum):
    """A run's state (the seeds' table "Run states")."""

    PENDING = "Pending"
    STARTING = "Starting"
    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


class WorkerState(StrEnum):
    """A worker's state: the run's, and the seeds' "Preparing, Pulling, ReadyToStart, Stale, Down"."""

    PENDING = "Pending"
    #: Placed: its machine is making it ready (a sandbox, drives).
    PREPARING = "Preparing"
    #: Its machine is pulling its image (at once where the image is there, as on the local cluster).
    PULLING = "Pulling"
    READY = "ReadyToStart"
    RUNNING = "Running"
    #: Its machine stopped reporting; it holds its place until it reports again, or for
    #: ``STALE_TIMEOUT_SECONDS``: then it is Down, counted as lost.
    STALE = "Stale"
    COMPLETED = "Completed"
    FAILED = "Failed"
    #: Stopped by the scheduler (cancelled, or its run failed); not a failure of its own.
    STOPPED = "Stopped"
    #: Its machine was lost.
    DOWN = "Down"


#: Run states that do not change again by themselves.
FINAL_RUN_STATES: frozenset[str] = frozenset({RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED})


# ---- reasons (the seeds' words; CONTRACT §7) ----------------------------------------------------

QUEUED = "Waiting in the queue"
CONTAINER_RUNNING = "Container running"
CANCELLED_BY_USER = "Cancelled by a user"
#: A run with drives waits with this where no sandbox can be made to mount them (bwrap missing,
#: user namespaces off): it never runs with its drives missing.
DRIVES_NEED_SANDBOX = "Drives need a sandbox: install bubblewrap"

#: A Stale worker (its machine stopped reporting) is counted as lost, Down, after this long.
STALE_TIMEOUT_SECONDS = 5 * 60


def pulling(image: str) -> str:
    """``Pulling image IMAGE``."""
    return msg.PULLING_REASON.format(image=image)


@functools.cache
def quota_gpus(workspace: str, n: int) -> str:
    """``Workspace W is at its quota of N GPUs``: a run or copy that waits only on its quota."""
    return msg.QUOTA_GPUS_REASON.format(workspace=workspace, n=n)


def budget_spent(workspace: str, hours: int, per: str) -> str:
    """``Workspace W has used its N GPU-hours this month``: a new run of a workspace whose
    GPU-hour budget for the period is spent waits with this."""
    return msg.BUDGET_SPENT_REASON.format(workspace=workspace, hours=hours, per=per)


@functools.cache
def quota_runs(workspace: str, n: int) -> str:
    """``Workspace W is at its quota of N running runs``: a run that would be one run too many
    (kept, as ``quota_gpus``: a tick asks them of every run its workspace's quota holds)."""
    return msg.QUOTA_RUNS_REASON.format(workspace=workspace, n=n)


def stale(machine: str) -> str:
    """``Machine M stopped reporting``: why a worker is Stale."""
    return f"Machine {machine} stopped reporting"


def machine_lost(machine: str) -> str:
    """``Machine M was lost``: why a worker is Down when its machine is known lost."""
    return f"Machine {machine} was lost"


def lost_after_stale(machine: str, seconds: int = STALE_TIMEOUT_SECONDS) -> str:
    """``Machine M stopped reporting 5 min ago; counted as lost``: a Stale worker become Down."""
    ago = f"{seconds // 60} min" if seconds % 60 == 0 else f"{seconds} s"
    return f"{stale(machine)} {ago} ago; counted as lost"


def exited(code: int) -> str:
    """``Exited with code N``."""
    return msg.EXITED_REASON.format(code=code)


def worker_failed_on(worker: str, machine: str | None, reason: str) -> str:
    """``Worker RUN-I failed on MACHINE: REASON`` (``-`` for a worker never placed)."""
    return msg.WORKER_FAILED_ON.format(worker=worker, machine=machine or "-", reason=reason)


def array_cap(n: int) -> str:
    """``Array runs at most N workers at once``."""
    return msg.ARRAY_CAP_REASON.format(n=n)


def all_completed(n: int) -> str:
    """``All N workers completed``."""
    return msg.ALL_COMPLETED_REASON.format(n=n)


def readout(running: int, total: int) -> str:
    """``Workers R running of N``."""
    return msg.WORKERS_READOUT.format(running=running, total=total)


def time_limit_reason(seconds: int | None) -> str:
    """``Stopped at its time limit of 1h`` (``… time limit`` alone when the limit is not known)."""
    return msg.TIME_LIMIT_REASON.format(of=f" of {format_duration(seconds)}" if seconds else "")


# ---- restarts (the seeds' restart_policy: OnFailure) ---------------------------------------------

#: A failed or lost worker is restarted up to this many times.
RESTART_LIMIT = msg.RESTART_LIMIT
BACKOFF_START_SECONDS = 10
BACKOFF_MAX_SECONDS = 5 * 60
#: A worker (or run) that ran this long has its restart count reset.
RESET_AFTER_SECONDS = 10 * 60


def backoff_seconds(restart: int) -> int:
    """The wait before the ``restart``-th restart (1-based): 10 s, doubling, at most 5 min."""
    return min(BACKOFF_START_SECONDS * 2 ** max(restart - 1, 0), BACKOFF_MAX_SECONDS)


def next_restart(ran: float, spent: int) -> int:
    """The number of the next restart: one more than those spent, or 1 after a long enough run."""
    return (0 if ran >= RESET_AFTER_SECONDS else spent) + 1


def restart_reason(reason: str, n: int, delay: int, *, limited: bool = True) -> str:
    """``<reason>; restart N of 10 in D s`` (a Service's restarts have no limit: no `` of 10``)."""
    of = f" of {RESTART_LIMIT}" if limited else ""
    return msg.RESTART_REASON.format(reason=reason, n=n, of=of, delay=delay)


def completion_restart_reason(reason: str, why: str) -> str:
    """``<reason>; restarting in 10 s (<why>)``: a worker that completed, started again."""
    return msg.COMPLETION_RESTART_REASON.format(reason=reason, delay=BACKOFF_START_SECONDS, why=why)


def no_restarts_left(reason: str) -> str:
    """``<reason>; no restarts left (10 used)``."""
    return msg.NO_RESTARTS_LEFT.format(reason=reason, limit=RESTART_LIMIT)


# ---- sources -------------------------------------------------------------------------------------

#: How many apply records a source keeps (the newest).
HISTORY_KEEP = 100


# ---- which fields change in place ----------------------------------------------------------------

#: Fields a running run can take in place; every other field forces a replace (unknown → replace).
IN_PLACE_FIELDS: tuple[tuple[str, ...], ...] = (
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("spec", "array", "max_parallel"),
    ("spec", "priority"),
    ("spec", "replace"),
)


def forces_replace(steps: tuple[str | int, ...]) -> bool:
    """Whether changing the field at ``steps`` needs the run stopped and started again."""
    return not any(steps[: len(prefix)] == prefix for prefix in IN_PLACE_FIELDS)


def same(a: Any, b: Any) -> bool:
    """Equal as documents mean it: ``1`` is not ``true``, ``1`` is ``1.0``; maps and lists deeply."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, str) != isinstance(b, str):
        return False
    return a == b


_MISSING = object()


def changed_paths(old: Any, new: Any, path: FieldPath | None = None) -> Iterator[FieldPath]:
    """The paths where two documents differ: the deepest map key that differs, or a whole list."""
    path = FieldPath.root() if path is None else path
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(old.keys() | new.keys()):
            a, b = old.get(key, _MISSING), new.get(key, _MISSING)
            if a is _MISSING or b is _MISSING:
                yield path.child(key)
            else:
                yield from changed_paths(a, b, path.child(key))
    elif not same(old, new):
        yield path


def validate_update(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    """The errors of changing run ``old`` into ``new`` in place: one per replace-only field changed.

    Both are normalised documents (``reconciler.runspec.normalize``). Only ``IN_PLACE_FIELDS``
    may differ; the plan turns any other difference into a replace, and the API refuses it in a
    ``PUT`` (422), so no client can change, say, ``array.size`` of a running array in place.
    """
    errors = []
    for path in changed_paths(old, new):
        if str(path) == "metadata.name":
            errors.append(FieldError.forbidden(path, msg.UPDATE_RENAME))
        elif forces_replace(path.steps):
            errors.append(FieldError.forbidden(path, msg.UPDATE_REPLACE_ONLY.format(path=path)))
    return errors
