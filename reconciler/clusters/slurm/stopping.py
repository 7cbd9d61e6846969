"""Graceful stops on Slurm, and what a restarted worker is told: the pure half.

Owns: what a job is given to stop gracefully (``job_options``: ``--signal=B:SIG@GRACE`` before
its time limit, ``--requeue`` so a preempted job goes back to the queue under its own id, its
budget untouched), the signal and grace astra stops a run's jobs with (``stop_of``: the
template's ``stop_signal``, TERM, and ``stop_grace_seconds``, 30), and ``ASTRAEUS_ATTEMPT`` /
``ASTRAEUS_RESTART_REASON`` in every batch script (``ATTEMPT_LINES``): astra's own resubmissions
say their attempt and cause through the job's environment (``restart_env``: not secret), and
Slurm's requeues through ``SLURM_RESTART_COUNT``.

What astra controls per job and what it cannot (docs/slurm.md, "Graceful stops"): a cancel,
delete or replace of astra's is ``scancel --signal=SIG --full`` (the batch shell, its children
and every step), then, ``GRACE`` seconds later, a plain ``scancel`` (Slurm's SIGTERM, then
SIGKILL after the cluster's ``KillWait``); a time limit's signal comes ``GRACE`` seconds before
it (``early_signal``; ``policy.after_early_signal`` judges a job that ended failed after it could
have come as stopped by its time limit); a preemption's grace is the site's ``GraceTime``
(partition or QOS) and ``KillWait``, which no job can set.

Must not touch: processes, files, clocks.
"""

from __future__ import annotations

from typing import Any

from reconciler.runspec.lifecycle import STOP_GRACE_DEFAULT, STOP_SIGNAL_DEFAULT
from reconciler.runspec.models import Run

__all__ = [
    "ATTEMPT_LINES",
    "REQUEUED_REASON",
    "SIGNAL_EARLY",
    "early_signal",
    "job_options",
    "restart_env",
    "stop_of",
]

#: Slurm sends ``--signal``'s signal up to this many seconds before it is due (its timer's
#: resolution: sbatch(1)).
SIGNAL_EARLY = 60

#: What a worker Slurm requeued is told (``ASTRAEUS_RESTART_REASON``): preemption is what
#: ``--requeue`` asks for; Slurm does not tell the job whether it was a preemption, a node's
#: failure or an administrator's ``scontrol requeue`` (docs/slurm.md).
REQUEUED_REASON = "Preempted"

#: The batch script's lines that give the worker its attempt (0 first, one more on each restart:
#: astra's resubmissions, ``ASTRA_ATTEMPT``, plus Slurm's requeues of this job) and why it was
#: restarted; astra's variables are not left to the worker.
ATTEMPT_LINES = (
    "export ASTRAEUS_ATTEMPT=$(( ${ASTRA_ATTEMPT:-0} + ${SLURM_RESTART_COUNT:-0} ))",
    'if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then export ASTRAEUS_RESTART_REASON=' + REQUEUED_REASON,
    'elif [ -n "${ASTRA_RESTART_REASON:-}" ]; then',
    '  export ASTRAEUS_RESTART_REASON="$ASTRA_RESTART_REASON"; fi',
    "unset ASTRA_ATTEMPT ASTRA_RESTART_REASON",
)


def _templates(run: Run) -> list[Any]:
    if run.spec.task_groups:
        return [g.task_template for g in run.spec.task_groups]
    return [run.spec.task_template] if run.spec.task_template is not None else []


def stop_of(run: Run) -> tuple[str, int]:
    """The signal astra stops the run's jobs with and the grace before it ends them: the first
    template's ``stop_signal`` (TERM), the longest ``stop_grace_seconds`` (30)."""
    templates = _templates(run)
    signal = next((t.stop_signal for t in templates if t.stop_signal), None) or STOP_SIGNAL_DEFAULT
    graces = [
        t.stop_grace_seconds if t.stop_grace_seconds is not None else STOP_GRACE_DEFAULT for t in templates
    ]
    return signal, max(graces, default=STOP_GRACE_DEFAULT)


def job_options(template: Any) -> list[str]:
    """``--requeue``, and, with a time limit and a template that says how it stops
    (``stop_signal`` or ``stop_grace_seconds``), ``--signal=B:SIG@GRACE``: the batch shell (the
    worker itself, or the ``srun`` that forwards it to every task) is sent the stop signal
    ``GRACE`` seconds before the limit (Slurm sends it up to a minute early: its timer's
    resolution). Not by default: a worker that does not trap the signal would end of it before
    its limit, as a failure that restarts, where Slurm's own SIGTERM at the limit ends it as the
    time limit (``TIMEOUT``), after the cluster's ``KillWait``."""
    opts = ["--requeue"]
    early = early_signal(template)
    if early is not None:
        opts.append(f"--signal=B:{early[0]}@{early[1]}")
    return opts


def early_signal(template: Any) -> tuple[str, int] | None:
    """The signal and the seconds before its time limit a job of ``template`` is sent it
    (``job_options``); ``None``: it is sent none (Slurm's own SIGTERM at the limit)."""
    if template is None or template.time_limit_seconds is None:
        return None
    grace = template.stop_grace_seconds if template.stop_grace_seconds is not None else STOP_GRACE_DEFAULT
    said = template.stop_signal is not None or template.stop_grace_seconds is not None
    return (template.stop_signal or STOP_SIGNAL_DEFAULT, grace) if grace > 0 and said else None


def restart_env(attempt: int, cause: str, given: list[str] | None = None) -> list[str]:
    """The option that tells a resubmitted job its attempt and why (``ATTEMPT_LINES`` read it),
    joined with the ``--export=ALL,…`` of ``given`` (its secrets file's path): one ``--export``."""
    more = "".join("," + g.removeprefix("--export=ALL,") for g in given or ())
    return [f"--export=ALL,ASTRA_ATTEMPT={attempt},ASTRA_RESTART_REASON={cause}{more}"]
