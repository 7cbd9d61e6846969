"""From ``squeue --json`` to workers in the seeds' words: the pure decoding of the Slurm cluster.

Owns: reading ``squeue --json`` (Slurm 22.05, openapi v0.0.38) into ``JobRow``s, Slurm's hostlist
and array-index syntaxes, finding one submission's tasks among every job the controller knows
(``squeue`` ignores its own filters in 22.05: we filter here, by job id and by our ``--comment``,
so a job id reused after a cluster reset is not mistaken for ours), exit codes (``exit_code`` is
a wait status: the code is ``>> 8``, the signal ``& 0x7f``), and each Slurm state and reason as a
worker state and a reason in the seeds' words.

Must not touch: processes, files, clocks, restart decisions (``policy``). The states and reasons
that are the seeds' are the vocabulary's (``reconciler.runspec.vocabulary``); ``Unknown`` is a
worker state of Slurm's alone (the control plane never loses track of a worker).

=================  ============  ==================================================================
Slurm state        worker state  reason
=================  ============  ==================================================================
PENDING            Pending       ``Array runs at most N workers at once`` (JobArrayTaskLimit),
                                 ``Waiting in the queue`` (Priority, Resources, None …), or
                                 ``Slurm cannot start it: <Reason>`` for reasons no wait cures
CONFIGURING        Preparing     ``Preparing its machines``
RUNNING            Running       ``Running``
COMPLETING         Running       ``Ending``
SUSPENDED          Pending       ``Suspended by Slurm``
COMPLETED          Completed     ``Exited with code 0``
FAILED             Failed        ``Exited with code N`` (``Killed by signal S``)
TIMEOUT            Failed        ``Stopped at its time limit of 1m``
OUT_OF_MEMORY      Failed        ``Out of memory``
CANCELLED          Stopped       ``Cancelled outside astra (scancel)``
NODE_FAIL          Down          ``Its machine failed``
PREEMPTED          Pending       ``Preempted``
BOOT_FAIL, DEADL.  Failed        ``Slurm ended it: BOOT_FAIL``
(not known)        Unknown       ``Slurm no longer knows job N (MinJobAge): its outcome is unknown``
=================  ============  ==================================================================
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from reconciler.runspec.vocabulary import QUEUED, WorkerState, array_cap, exited, time_limit_reason

from .submission import parse_comment

__all__ = [
    "CANCELLED_OUTSIDE",
    "LIVE_SLURM_STATES",
    "UNKNOWN",
    "End",
    "JobRow",
    "TaskObs",
    "describe",
    "expand_hostlist",
    "expand_indices",
    "gone",
    "observe_submission",
    "parse_squeue",
]

#: How a worker's attempt ended, for the restart rules: None while it has not ended.
End = Literal["ok", "failed", "timeout", "cancelled", "lost", "preempted", "gone"]

#: A worker whose job Slurm no longer reports, before astra saw it end: Slurm's state alone.
UNKNOWN = "Unknown"
CANCELLED_OUTSIDE = "Cancelled outside astra (scancel)"
#: Slurm states of a job that has not ended.
LIVE_SLURM_STATES = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SIGNALING"})
#: Pending reasons that only time cures; any other keeps the job from ever starting as it is.
WAITING_REASONS = frozenset(
    {
        "None",
        "Priority",
        "Resources",
        "Dependency",
        "BeginTime",
        "JobArrayTaskLimit",
        "ReqNodeNotAvail",
        "Reservation",
        "NodeDown",
        "PartitionDown",
        "Licenses",
        "Prolog",
        "Cleaning",
        "JobHeldAdmin",
        "JobHeldUser",
    }
)
_END_OF_TIME = 2**31  # squeue's "no end time" lies beyond this


@dataclass(frozen=True)
class JobRow:
    """One record of ``squeue --json``: a job, an array task, or an array's pending rest."""

    job_id: int
    array_job_id: int
    array_task_id: int | None
    array_task_string: str
    array_max_tasks: int
    state: str
    reason: str
    exit_code: int | None
    start: float | None
    end: float | None
    nodes: tuple[str, ...]
    name: str
    comment: str
    #: A heterogeneous job's leader id and this component's offset (0 and 0 for other jobs).
    het_job_id: int = 0
    het_job_offset: int = 0


def _time(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and 0 < value < _END_OF_TIME else None


def parse_squeue(doc: dict[str, Any]) -> list[JobRow]:
    """Every job in a ``squeue --json`` document (22.05: openapi v0.0.38)."""
    rows = []
    for j in doc.get("jobs") or []:
        task = j.get("array_task_id")
        rows.append(
            JobRow(
                job_id=int(j["job_id"]),
                array_job_id=int(j.get("array_job_id") or 0),
                array_task_id=int(task) if isinstance(task, int) else None,
                array_task_string=j.get("array_task_string") or "",
                array_max_tasks=int(j.get("array_max_tasks") or 0),
                state=str(j.get("job_state") or "UNKNOWN"),
                reason=str(j.get("state_reason") or "None"),
                exit_code=j.get("exit_code") if isinstance(j.get("exit_code"), int) else None,
                start=_time(j.get("start_time")),
                end=_time(j.get("end_time")),
                nodes=tuple(expand_hostlist(j.get("nodes") or "")),
                name=str(j.get("name") or ""),
                comment=str(j.get("comment") or ""),
                het_job_id=int(j.get("het_job_id") or 0),
                het_job_offset=int(j.get("het_job_offset") or 0),
            )
        )
    return rows


_HOST_RE = re.compile(r"([^,\[]+)(?:\[([^\]]+)\])?")


def expand_hostlist(text: str) -> list[str]:
    """Slurm's hostlist: ``vm-n[1-2],gpu[01-03,7]`` → ``[vm-n1, vm-n2, gpu01, gpu02, gpu03, gpu7]``."""
    hosts: list[str] = []
    pos = 0
    while pos < len(text):
        m = _HOST_RE.match(text, pos)
        if m is None:
            break
        prefix, ranges = m.group(1), m.group(2)
        if ranges is None:
            hosts.append(prefix)
        else:
            for part in ranges.split(","):
                lo, _, hi = part.partition("-")
                for n in range(int(lo), int(hi or lo) + 1):
                    hosts.append(f"{prefix}{str(n).zfill(len(lo))}")
        pos = m.end() + 1  # the comma
    return hosts


def expand_indices(text: str) -> list[int]:
    """An array's index string: ``2-5%2`` or ``1,3,5-9:2`` → the indices (the ``%cap`` dropped)."""
    out: list[int] = []
    for part in text.split("%")[0].split(","):
        if not part:
            continue
        span, _, step = part.partition(":")
        lo, _, hi = span.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1, int(step or 1)))
    return out


@dataclass(frozen=True)
class TaskObs:
    """One worker's current attempt as Slurm reports it, in the seeds' words."""

    state: str
    reason: str
    end_kind: End | None = None
    exit_code: int | None = None
    machines: tuple[str, ...] = ()
    started_at: float | None = None
    ended_at: float | None = None
    slurm_state: str = ""

    @property
    def machine(self) -> str | None:
        return self.machines[0] if self.machines else None


def describe(row: JobRow, time_limit: int | None) -> TaskObs:
    """One row as a worker's state and reason."""
    state, reason = row.state, row.reason
    if state in ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"):
        if reason == "JobArrayTaskLimit":
            words = array_cap(row.array_max_tasks)
        elif reason in WAITING_REASONS:
            words = QUEUED if reason in ("None", "Priority", "Resources") else f"{QUEUED} ({reason})"
        else:
            words = f"Slurm cannot start it: {reason}"
        return TaskObs(WorkerState.PENDING, words, slurm_state=state)
    if state == "CONFIGURING":
        return _live(row, WorkerState.PREPARING, "Preparing its machines")
    if state == "RUNNING":
        return _live(row, WorkerState.RUNNING, "Running")
    if state == "SIGNALING":  # a signal being sent (--signal, scancel --signal): still running
        return _live(row, WorkerState.RUNNING, "Running")
    if state == "COMPLETING":
        return _live(row, WorkerState.RUNNING, "Ending")
    if state in ("SUSPENDED", "STOPPED"):
        return _live(row, WorkerState.PENDING, "Suspended by Slurm")
    return _ended(row, time_limit)


def _live(row: JobRow, state: str, words: str) -> TaskObs:
    return TaskObs(state, words, machines=row.nodes, started_at=row.start, slurm_state=row.state)


def _ended(row: JobRow, time_limit: int | None) -> TaskObs:
    """A row of a job that ended: how, and in which words."""
    code = row.exit_code
    exit_code = code >> 8 if code is not None else None
    signal = code & 0x7F if code is not None else 0
    end: End = "failed"
    state, words = WorkerState.FAILED, f"Slurm ended it: {row.state}"
    if row.state == "COMPLETED":
        state, words, end = WorkerState.COMPLETED, exited(0), "ok"
    elif row.state == "FAILED":
        words = exited(exit_code or 0) if not signal else f"Killed by signal {signal}"
    elif row.state == "TIMEOUT":
        words, end = time_limit_reason(time_limit), "timeout"
    elif row.state == "OUT_OF_MEMORY":
        words = "Out of memory"
    elif row.state == "CANCELLED":
        state, words, end = WorkerState.STOPPED, CANCELLED_OUTSIDE, "cancelled"
    elif row.state == "NODE_FAIL":
        state, words, end = WorkerState.DOWN, "Its machine failed", "lost"
    elif row.state == "PREEMPTED":
        state, words, end = WorkerState.PENDING, "Preempted", "preempted"
    return TaskObs(
        state,
        words,
        end,
        exit_code,
        machines=row.nodes,
        started_at=row.start,
        ended_at=row.end,
        slurm_state=row.state,
    )


def gone(job_id: int) -> TaskObs:
    """A task Slurm no longer reports (it forgets ended jobs after MinJobAge)."""
    return TaskObs(
        UNKNOWN,
        f"Slurm no longer knows job {job_id} (it forgets ended jobs after MinJobAge): its outcome is unknown",
        "gone",
    )


def observe_submission(
    rows: Iterable[JobRow],
    job_id: int,
    nonce: str,
    indices: Iterable[int] | None,
    time_limit: int | None = None,
    *,
    components: int | None = None,
    time_limits: list[int | None] | None = None,
) -> dict[int, TaskObs]:
    """The tasks of one submission, by array index (0 for a job that is not an array).

    ``components``: the submission is a heterogeneous job of that many components; the result
    is by component (``het_job_offset``), each decoded with its own ``time_limits`` entry.

    Rows count only if their comment names the submission's nonce (``sub=``): job ids restart
    after a cluster reset, and an in-place update rewrites the spec hash, never the nonce.
    An index Slurm no longer reports is ``Unknown`` (see ``gone``).
    """
    out: dict[int, TaskObs] = {}
    for row in rows:
        mark = parse_comment(row.comment)
        if mark is None or mark["sub"] != nonce:
            continue
        if components is not None:
            if row.het_job_id == job_id:
                limit = time_limits[row.het_job_offset] if time_limits else time_limit
                out[row.het_job_offset] = describe(row, limit)
            continue
        if indices is None:
            if row.job_id == job_id and row.array_job_id == 0:
                out[0] = describe(row, time_limit)
            continue
        if row.array_job_id != job_id:
            continue
        if row.array_task_id is not None:
            out[row.array_task_id] = describe(row, time_limit)
        elif row.array_task_string:
            pending = describe(row, time_limit)
            for i in expand_indices(row.array_task_string):
                out.setdefault(i, pending)
    if components is not None:
        indices = range(components)
    for i in [0] if indices is None else indices:
        out.setdefault(i, gone(job_id))
    return out
