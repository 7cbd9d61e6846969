"""Reading the queue fast: ``squeue``'s text format, and the rows by submission (pure).

Owns: ``SQUEUE_FIELDS`` (the ``squeue -O`` format astra reads, one ``|``-separated line a job,
times as epoch seconds through ``SLURM_TIME_FORMAT=%s``), ``parse_squeue_text`` (those lines into
the ``JobRow``s ``decode.parse_squeue`` reads from ``squeue --json``), and ``Queue`` (one
reading's lines by the submission each names, each parsed when asked for).

Why not ``--json``: Slurm 22.05 writes about 22 kB of JSON a job (every field of the job's
record), so 1,000 jobs are 24 MB and 1.5 s of squeue and 0.5 s of parsing on these machines,
against 0.1 MB and under 0.1 s for the fields astra reads; a cluster shared with other teams
holds tens of thousands of jobs, and ``--json`` gives every job whatever its filters (22.05).
``squeue --json`` stays as the reference: a test holds that the two readings give the same rows
(``tests/slurm/test_queue_text.py``).

Must not touch: processes, files, clocks (the command is run by ``commands``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .decode import JobRow, expand_hostlist
from .submission import parse_comment

__all__ = ["SQUEUE_FIELDS", "SQUEUE_TIME_FORMAT", "Queue", "parse_squeue_text"]

#: What astra reads of each job. The comment and the name come last: a name may hold anything
#: (another user's job), and astra's comments never hold a ``|``.
SQUEUE_FIELDS = (
    "JobID:|,ArrayJobID:|,ArrayTaskID:|,State:|,Reason:|,exit_code:|,StartTime:|,EndTime:|,"
    "NodeList:|,HetJobID:|,HetJobOffset:|,Comment:|,Name:"
)
#: ``SLURM_TIME_FORMAT``: squeue's times as epoch seconds, not the local time of day.
SQUEUE_TIME_FORMAT = "%s"
_COLUMNS = 13
_UNSET = ("N/A", "NONE", "Unknown", "")


def parse_squeue_text(text: str) -> list[JobRow]:
    """Every job of ``squeue -h -t all -O SQUEUE_FIELDS`` (see the module docstring)."""
    rows: list[JobRow] = []
    for line in text.splitlines():
        cols = line.split("|", _COLUMNS - 1)
        if len(cols) != _COLUMNS or not cols[0].strip().isdigit():
            continue
        job, array_job, task, state, reason, code, start, end, nodes, het, offset, comment, name = (
            c.strip() for c in cols
        )
        is_array = task not in _UNSET
        rows.append(
            JobRow(
                job_id=int(job),
                array_job_id=_int(array_job) if is_array else 0,
                array_task_id=int(task) if task.isdigit() else None,
                array_task_string="" if task.isdigit() or not is_array else task,
                array_max_tasks=_throttle(task),
                state=state or "UNKNOWN",
                reason=reason or "None",
                exit_code=_int(code) if code.lstrip("-").isdigit() else None,
                start=_time(start),
                end=_time(end),
                nodes=tuple(expand_hostlist(nodes)),
                name=name,
                comment=comment,
                het_job_id=_int(het),
                het_job_offset=_int(offset),
            )
        )
    caps = {r.array_job_id: r.array_max_tasks for r in rows if r.array_max_tasks}
    return [r if r.array_max_tasks else replace(r, array_max_tasks=caps.get(r.array_job_id, 0)) for r in rows]


def _int(text: str) -> int:
    return int(text) if text.isdigit() else 0


def _time(text: str) -> float | None:
    return float(text) if text.isdigit() and int(text) > 0 else None


def _throttle(task: str) -> int:
    """An array's cap from its pending rest (``2-5%2``), as ``--json``'s ``array_max_tasks``
    gives it; 0 where the row does not say it (the other rows of its array may)."""
    _, cut, cap = task.rpartition("%")
    return int(cap) if cut and cap.isdigit() else 0


class Queue:
    """What one ``squeue`` said, its rows by the submission (``sub=`` nonce) each names: a run's
    observation reads only its own rows, so observing every run costs one pass over the queue,
    not one pass a run. Rows of jobs astra did not submit are left out.

    A line is parsed only when a run asks for its submission: the queue holds every user's
    jobs and the finished ones for ``MinJobAge``, and the team's older submissions of the same
    names (a run deleted and made again), which no observation reads (30,700 rows, 1,000 of
    them asked: 0.30 s parsed in full, 0.03 s so)."""

    def __init__(self, text: str):
        self._lines: dict[str, list[str]] = {}
        for line in text.splitlines():
            nonce = _nonce_of(line)
            if nonce is not None:
                self._lines.setdefault(nonce, []).append(line)
        self._rows: dict[str, list[JobRow]] = {}

    def of(self, record: dict[str, Any]) -> list[JobRow]:
        """The rows of every submission of ``record`` (each attempt's nonce)."""
        nonces = dict.fromkeys(a["nonce"] for a in record["attempts"])
        return [row for n in nonces for row in self._of(n)]

    def _of(self, nonce: str) -> list[JobRow]:
        rows = self._rows.get(nonce)
        if rows is None:
            parsed = parse_squeue_text("\n".join(self._lines.get(nonce, ())))
            rows = self._rows[nonce] = [r for r in parsed if _names(r.comment, nonce)]
        return rows


#: What a comment astra wrote holds before its submission's nonce (``submission.comment_for``).
_SUB = ",sub="


def _nonce_of(line: str) -> str | None:
    """The nonce a line's comment seems to name (after the first ``,sub=``, up to the next ``,``
    or ``|``), a look without parsing: ``Queue._of`` keeps only the rows whose comment names it."""
    at = line.find(_SUB)
    if at < 0:
        return None
    start = at + len(_SUB)
    end = line.find("|", start)
    if end < 0:
        return None
    comma = line.find(",", start, end)
    return line[start : end if comma < 0 else comma].strip()


def _names(comment: str, nonce: str) -> bool:
    mark = parse_comment(comment)
    return mark is not None and mark["sub"] == nonce
