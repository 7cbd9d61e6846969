"""Submitting a run's jobs and recording each submission: what the cluster does with ``sbatch``.

Owns: the ``--begin`` of a restart that waits, the ``--dependency=after`` of a group that starts
after another (on that group's job of this round, or on its current job while it has not
started), the nonce each submission carries in its comment, and the attempts appended to the
run's record (job id, nonce, units covered, restart spent, why, when, not before).

Must not touch: Slurm's commands (``sbatch`` is given, so the submission order can be tested
with it faked), the lock, the clock (``now`` is an argument), restart decisions.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from reconciler.runspec.lifecycle import RESTARTED_AFTER
from reconciler.runspec.models import Run

from .policy import Resubmit
from .records import units
from .stopping import restart_env
from .submission import Submission, comment_for, comment_nonce

__all__ = ["Sbatch", "begin_option", "needs_options", "new_nonce", "resubmit", "submit_group_jobs"]

#: ``sbatch``: a batch script and options beyond its ``#SBATCH`` lines, to the job id.
Sbatch = Callable[[str, list[str]], int]


def new_nonce() -> str:
    """A submission's own mark in its comment (``sub=``): job ids are reused, nonces are not."""
    return uuid.uuid4().hex[:12]


def begin_option(not_before: float) -> str:
    """``--begin``: Slurm starts the job no earlier (local time, to the second)."""
    return "--begin=" + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(not_before))


def submit_group_jobs(
    record: dict[str, Any],
    sub: Submission,
    sbatch: Sbatch,
    *,
    generation: str,
    restart: int,
    why: str,
    not_before: float | None,
    now: float,
    only: set[int] | None = None,
    pending: set[int] | None = None,
    needs: str | None = None,
    hold: bool = False,
    cause: str = RESTARTED_AFTER["Failed"],
    secrets: Callable[[tuple[int, ...]], list[str]] | None = None,
) -> None:
    """Submit the group jobs of ``sub``, in ``start_after`` order: all of them, or ``only`` some
    groups, whose predecessors keep their jobs (``pending``: the groups not started yet);
    ``needs``: the run's ``--dependency=`` on other runs, given to every job beside its own
    ``after:`` (``hold``: submitted held, some of those runs not created yet); ``secrets``: the
    options that give a job (by its groups) its secrets (``--export``, joined with a restart's)."""
    record["generation"] = generation
    current = units(record)
    nonce = comment_nonce(sub.comment)
    job_ids: dict[int, int] = {}
    for job in sub.jobs:
        if only is not None and not set(job.groups) & only:
            continue
        extra: list[str] = []
        dep = _predecessor(job.after, job_ids, current, pending or set())
        after = f"after:{dep}" if dep is not None else None
        if needs is not None or hold:
            extra += needs_options(needs, hold=hold, also=after)
        elif after is not None:
            # Slurm's `after`: start once that job has started (the seeds' start_after).
            extra += [f"--dependency={after}", "--kill-on-invalid-dep=yes"]
        begin = not_before is not None and not_before > now and dep is None
        if begin:
            assert not_before is not None
            extra.append(begin_option(not_before))
        given = secrets(job.groups) if secrets else []  # its secrets file's path (``--export``)
        attempt = max(_attempts_of(record, g) for g in job.groups)
        # a restart: each group's attempt, and why (``stopping.ATTEMPT_LINES``), in one --export
        extra += restart_env(attempt, cause, given) if restart or why else given
        job_id = sbatch(job.script, extra)
        for g in job.groups:
            job_ids[g] = job_id
        record["attempts"].append(
            {
                "job_id": job_id,
                "nonce": nonce,
                "indices": list(job.groups),
                "restart": restart,
                "why": why,
                "at": now,
                "not_before": not_before if begin else None,
                "after": after,
            }
        )


def _predecessor(
    after: int | None, job_ids: dict[int, int], current: dict[int, Any], pending: set[int]
) -> int | None:
    """The job a group's job starts after: its predecessor's of this round, or its current one
    while that has not started (``pending``); ``None`` when it starts after none."""
    if after is None:
        return None
    dep = job_ids.get(after)
    if dep is None and after in pending and after in current:
        dep = current[after]["job_id"]  # its predecessor has not started yet
    return dep


def needs_options(needs: str | None, *, hold: bool, also: str | None = None) -> list[str]:
    """The options of a run's first submission that waits for other runs: their
    ``--dependency`` (``needs``, joined with ``also``, a group's own ``after:``), kept in the
    queue when Slurm finds it can never be met (astra judges that: ``dependencies``), and
    ``--hold`` when some of those runs are not created yet (released once they are)."""
    spec = [p for p in (also, needs.removeprefix("--dependency=") if needs else None) if p]
    opts = ["--dependency=" + ",".join(spec)] if spec else []
    if needs is not None:
        opts.append("--kill-on-invalid-dep=no")
    return [*opts, "--hold"] if hold else opts


def _attempts_of(record: dict[str, Any], index: int) -> int:
    """How many submissions have covered unit ``index``: the attempt of its next one."""
    return sum(1 for a in record["attempts"] if a["indices"] is None or index in a["indices"])


def resubmit(
    record: dict[str, Any],
    run: Run,
    r: Resubmit,
    sbatch: Sbatch,
    now: float,
    secrets: Callable[[Run, str, list[int]], list[str]] | None = None,
    *,
    hold: bool = False,
) -> None:
    """Submit a unit of a run of one worker template again (an array's copy, or the whole job);
    ``secrets``: the options that give the new submission (its nonce, its copies) its secrets;
    ``hold``: submitted ``--hold``, no secrets file written (a secret it reads is not set:
    ``held`` writes them and releases it)."""
    nonce = new_nonce()
    extra = [f"--comment={comment_for(run, nonce)}"]
    copies = [] if hold else [r.index] if record["kind"] == "array" else [0]
    given = secrets(run, nonce, copies) if secrets else []
    extra += restart_env(_attempts_of(record, r.index), r.cause, given)
    if hold:
        extra.append("--hold")
    if record["kind"] == "array":
        extra.append(f"--array={r.index}")
    if r.not_before > now:
        extra.append(begin_option(r.not_before))
    job_id = sbatch(record["script"], extra)
    indices = [r.index] if record["kind"] == "array" else None
    record["attempts"].append(
        {
            "job_id": job_id,
            "nonce": nonce,
            "indices": indices,
            "restart": r.restart,
            "why": r.why,
            "at": now,
            "not_before": r.not_before,
            **({"held": True} if hold else {}),
        }
    )
