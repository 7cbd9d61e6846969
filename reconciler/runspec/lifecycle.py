"""The words and numbers of a run's life beyond the seeds (issue 31): held replaces, runs that
wait for something that does not exist yet, graceful stops. One place for each fact: the models,
the plan, the scheduler, the executor and the docs read them here.

Must not touch: anything but words and numbers (pure; imports nothing of ours but the root's).
"""

from __future__ import annotations

from typing import Literal

from .messages import RESTART_LIMIT
from .quantities import duration_words

__all__ = [
    "EXIT_CODE_MAX",
    "EXIT_CODE_MIN",
    "REPLACE_IMMEDIATELY",
    "REPLACE_WHEN_FINISHED",
    "RESTARTED_AFTER",
    "RESTARTED_FOR",
    "STOP_GRACE_DEFAULT",
    "STOP_GRACE_MAX",
    "STOP_SIGNALS",
    "STOP_SIGNAL_DEFAULT",
    "WHEN_MET",
    "DependsWhen",
    "ExitAction",
    "ReplacePolicy",
    "StopSignal",
    "budget_kept",
    "dependency_unmet",
    "exit_rule_words",
    "held_words",
    "missing_drive",
    "replace_policy",
    "waiting_for_run",
]

#: ``spec.replace``: when a change that forces a replace of a run holding workers is carried out.
ReplacePolicy = Literal["WhenFinished", "Immediately"]
REPLACE_WHEN_FINISHED = "WhenFinished"
REPLACE_IMMEDIATELY = "Immediately"


def replace_policy(spec: object) -> str:
    """A run document's ``spec.replace``, or its default: ``Immediately`` for a Service (it never
    ends, so a held replace would wait for ever: a Deployment rolls at once too), else
    ``WhenFinished`` (a Job's spec is immutable in Kubernetes: no push stops a training run)."""
    if not isinstance(spec, dict):
        return REPLACE_WHEN_FINISHED
    given = spec.get("replace")
    if given in (REPLACE_WHEN_FINISHED, REPLACE_IMMEDIATELY):
        return str(given)
    return REPLACE_IMMEDIATELY if spec.get("lifetime") == "Service" else REPLACE_WHEN_FINISHED


def held_words(name: str, state: str, ran_seconds: float | None, gpus: int) -> str:
    """``gf-train is Running (3h12m, 16 GPUs); it will be replaced when it ends``."""
    said = [duration_words(ran_seconds).replace(" ", "")] if ran_seconds is not None else []
    said.append(f"{gpus} GPU" if gpus == 1 else f"{gpus} GPUs")
    return f"{name} is {state} ({', '.join(said)}); it will be replaced when it ends"


def missing_drive(name: str, where: str) -> str:
    """Why a run's workers wait for a drive: ``Drive 'datasets' does not exist in workspace
    default: astra drive create datasets --path DIR`` (``where``: the workspace in words, the org's
    named when it is not the default one)."""
    return f"Drive {name!r} does not exist in {where}: astra drive create {name} --path DIR"


#: ``ASTRAEUS_RESTART_REASON``: why a worker went back to the queue, by how it had ended...
RESTARTED_AFTER = {"Failed": "Failed", "Down": "MachineLost", "Completed": "Completed"}
#: ... or by why the scheduler stopped it (``StopCause``'s values).
RESTARTED_FOR = {"Preempted": "Preempted", "RunRestart": "RunRestarted", "Barrier": "GangBarrier"}

#: ``task_template.on_exit_codes[].action``: what an exit code means. FailJob: the run fails at
#: once; Restart: restarted as ``restart_policy`` would, spending the budget; RestartIgnoreBudget:
#: restarted, the budget kept (JobSet's failurePolicy rules, Kubernetes' podFailurePolicy).
ExitAction = Literal["FailJob", "Restart", "RestartIgnoreBudget"]
EXIT_CODE_MIN, EXIT_CODE_MAX = 1, 255


def exit_rule_words(code: int, at: int, action: str) -> str:
    """``Exited with code 3 (on_exit_codes[0]: FailJob)``: which rule decided, in words."""
    return f"Exited with code {code} (on_exit_codes[{at}]: {action})"


def budget_kept(reason: str, delay: int, spent: int) -> str:
    """``<reason>; restarting in 10 s, the restart budget kept (2 of 10 spent)``."""
    return f"{reason}; restarting in {delay} s, the restart budget kept ({spent} of {RESTART_LIMIT} spent)"


#: ``spec.depends_on[].when``: the end of the other run this run starts after. Completed (the
#: default: Slurm's afterok), Failed (afternotok), Finished (any end: afterany).
DependsWhen = Literal["Completed", "Failed", "Finished"]
#: The run states each ``when`` accepts.
WHEN_MET = {
    "Completed": ("Completed",),
    "Failed": ("Failed",),
    "Finished": ("Completed", "Failed", "Cancelled"),
}


def waiting_for_run(name: str, state: str | None) -> str:
    """``Waiting for run preprocess (Running)``; ``(not created yet)`` when there is none."""
    return f"Waiting for run {name} ({state or 'not created yet'})"


def dependency_unmet(name: str, state: str, when: str) -> str:
    """``Run preprocess ended Failed; this run needs it Completed``."""
    return f"Run {name} ended {state}; this run needs it {when}"


#: ``task_template.stop_grace_seconds``: between the stop signal and SIGKILL (Kubernetes' 30 s).
STOP_GRACE_DEFAULT = 30
STOP_GRACE_MAX = 3600
#: ``task_template.stop_signal``: what a worker is sent first when it is stopped.
StopSignal = Literal["TERM", "INT", "USR1", "USR2", "HUP", "QUIT"]
STOP_SIGNALS = ("TERM", "INT", "USR1", "USR2", "HUP", "QUIT")
STOP_SIGNAL_DEFAULT = "TERM"
