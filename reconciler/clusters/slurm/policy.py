"""Restarts, failure and lifetime on Slurm: pure decisions over observed workers and a clock.

Owns: the seeds' rules for ``restart_policy``, ``on_failure`` and ``lifetime: Service`` as astra
carries them out on Slurm (Slurm's own requeue is another rule: it never backs off, never
counts, and restarts on node failure only), and the run's state and reason from its workers.

Must not touch: processes, files, the real clock (``now`` is an argument); the limit, the
backoff and the states, which are the vocabulary's (``reconciler.runspec.vocabulary``). The
observe step calls ``judge`` and the cluster carries out the ``Resubmit``s (``sbatch --begin``).

Rules (the seeds', as the embedded control plane keeps them):

* A failed worker under ``OnFailure`` (or ``Always``) is resubmitted, up to 10 times, waiting
  10 s before the first restart and doubling up to 5 min, counted from when it ended. A worker that
  ran 10 minutes has its count reset. A Service's failures back off the same way, without a limit.
* ``Always`` and a Service also restart a worker that completed, 10 s after, spending no budget.
* ``Never`` (outside a Service): a failed worker stays failed.
* ``FailJob``: the first failure fails the run; its other workers are cancelled.
* A worker stopped by its time limit is never restarted (a Service's is); so is one that ended
  failed after its early stop signal could have come (``after_early_signal``).
* ``task_template.on_exit_codes`` is checked first for a worker that exited with a code (as the
  embedded control plane does): ``FailJob`` fails the run at once, ``Restart`` restarts as
  ``OnFailure`` (even under ``Never``), ``RestartIgnoreBudget`` restarts after 10 s without
  spending the budget; the worker's reason names the rule.
* A worker cancelled outside astra (``scancel``) is not restarted; a preempted one is, without
  spending its budget.
* Units: each copy of an array restarts on its own; a run of one worker template is one Slurm job,
  and restarts as a whole (``RestartJob``). A run with worker groups has one unit per group (its
  job, whose workers srun kills together): ``group_restarts`` says what a group's restart covers.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from reconciler.runspec import messages as msg
from reconciler.runspec.lifecycle import RESTARTED_AFTER, RESTARTED_FOR, budget_kept, exit_rule_words
from reconciler.runspec.models import OnFailure, RestartPolicy
from reconciler.runspec.vocabulary import (
    BACKOFF_START_SECONDS,
    RESTART_LIMIT,
    RunState,
    WorkerState,
    all_completed,
    backoff_seconds,
    completion_restart_reason,
    next_restart,
    no_restarts_left,
    readout,
    restart_reason,
    time_limit_reason,
)

from .decode import CANCELLED_OUTSIDE, UNKNOWN, TaskObs
from .stopping import SIGNAL_EARLY, early_signal

__all__ = [
    "GroupRestarts",
    "Policy",
    "Resubmit",
    "RunStatus",
    "Unit",
    "Verdict",
    "after_early_signal",
    "group_restarts",
    "judge",
    "run_status",
]


@dataclass(frozen=True)
class Policy:
    """A unit's restart rules, as its run (and its group) resolve them."""

    restart_policy: RestartPolicy
    on_failure: OnFailure
    #: ``lifetime: Service``: every ending is restarted, without a limit.
    service: bool
    array: bool
    #: ``on_exit_codes``, in order: ``(codes, action)`` of each rule.
    exit_codes: tuple[tuple[tuple[int, ...], str], ...] = ()

    def exit_rule(self, code: int | None) -> tuple[int, str] | None:
        """The first rule naming ``code``: its index and action; ``None`` when none does."""
        if code is None:
            return None
        for at, (codes, action) in enumerate(self.exit_codes):
            if code in codes:
                return at, action
        return None


@dataclass(frozen=True)
class Unit:
    """What restarts as one: an array copy (``index``), or the whole job (index 0)."""

    index: int
    obs: TaskObs
    #: Restarts spent by the current attempt (0 for the first submission).
    restarts: int = 0
    #: Why the current attempt was submitted, when it is a restart (shown while it waits).
    why: str = ""


@dataclass(frozen=True)
class Resubmit:
    index: int
    restart: int
    not_before: float
    why: str
    #: ``ASTRAEUS_RESTART_REASON`` of the restarted worker (``runspec.lifecycle``'s words).
    cause: str = RESTARTED_AFTER["Failed"]


@dataclass(frozen=True)
class Verdict:
    """A unit's worker state and reason after the rules, and what to do about it."""

    state: str
    reason: str
    final: bool = False
    resubmit: Resubmit | None = None
    #: This failure fails the whole run (its other workers are to be cancelled).
    fails_run: bool = False


def judge(policy: Policy, unit: Unit, now: float) -> Verdict:
    """The rules for one unit's current attempt."""
    obs = unit.obs
    if obs.end_kind is None:
        reason = unit.why if unit.why and obs.state == WorkerState.PENDING else obs.reason
        return Verdict(obs.state, reason)
    ended = obs.ended_at if obs.ended_at is not None else now
    kind = obs.end_kind
    if kind == "ok":
        if policy.service or policy.restart_policy == "Always":
            why_words = "it is a Service" if policy.service else "restart_policy Always"
            why = completion_restart_reason(obs.reason, why_words)
            resubmit = Resubmit(
                unit.index, unit.restarts, ended + BACKOFF_START_SECONDS, why, RESTARTED_AFTER["Completed"]
            )
            return Verdict(WorkerState.PENDING, why, resubmit=resubmit)
        return Verdict(obs.state, obs.reason, final=True)
    if kind in ("cancelled", "gone"):
        return Verdict(obs.state, obs.reason, final=True)
    if kind == "preempted":
        why = "Preempted; back in the queue"
        again = Resubmit(unit.index, unit.restarts, now, why, RESTARTED_FOR["Preempted"])
        return Verdict(WorkerState.PENDING, why, resubmit=again)
    if kind == "timeout" and not policy.service:
        return Verdict(obs.state, obs.reason, final=True, fails_run=not policy.array)
    rule = policy.exit_rule(obs.exit_code) if kind == "failed" and obs.slurm_state == "FAILED" else None
    if rule is not None:
        return _ruled(policy, unit, rule, ended)
    if not policy.service and (policy.on_failure == "FailJob" or policy.restart_policy == "Never"):
        fails = policy.on_failure == "FailJob" or not policy.array
        return Verdict(obs.state, obs.reason, final=True, fails_run=fails)
    ran = ended - obs.started_at if obs.started_at is not None else 0
    n = next_restart(ran, unit.restarts)
    if n > RESTART_LIMIT and not policy.service:
        reason = no_restarts_left(obs.reason)
        return Verdict(obs.state, reason, final=True, fails_run=not policy.array)
    delay = backoff_seconds(n)
    why = restart_reason(obs.reason, n, delay, limited=not policy.service)
    cause = RESTARTED_AFTER["Down" if kind == "lost" else "Failed"]
    return Verdict(WorkerState.PENDING, why, resubmit=Resubmit(unit.index, n, ended + delay, why, cause))


def _ruled(policy: Policy, unit: Unit, rule: tuple[int, str], ended: float) -> Verdict:
    """A failed worker whose exit code a rule of ``on_exit_codes`` names: the rule decides."""
    obs, (at, action) = unit.obs, rule
    words = exit_rule_words(obs.exit_code or 0, at, action)
    if action == "FailJob":
        return Verdict(obs.state, words, final=True, fails_run=True)
    cause = RESTARTED_AFTER["Failed"]
    if action == "RestartIgnoreBudget":
        why = budget_kept(words, BACKOFF_START_SECONDS, unit.restarts)
        again = Resubmit(unit.index, unit.restarts, ended + BACKOFF_START_SECONDS, why, cause)
        return Verdict(WorkerState.PENDING, why, resubmit=again)
    ran = ended - obs.started_at if obs.started_at is not None else 0
    n = next_restart(ran, unit.restarts)
    if n > RESTART_LIMIT and not policy.service:
        return Verdict(obs.state, no_restarts_left(words), final=True, fails_run=not policy.array)
    delay = backoff_seconds(n)
    why = restart_reason(words, n, delay, limited=not policy.service)
    return Verdict(WorkerState.PENDING, why, resubmit=Resubmit(unit.index, n, ended + delay, why, cause))


def after_early_signal(obs: TaskObs, template: Any) -> TaskObs:
    """A job that ended ``FAILED`` (an exit code, or killed by a signal) once its early stop
    signal could have come (``SIGNAL_EARLY`` before it was due) is stopped by its time limit, as
    an Astraeus cluster says: Failed, never restarted, in the time limit's words and its own.
    Slurm keeps no trace of having sent the signal, so the time is what tells: a time limit no
    longer than the grace and ``SIGNAL_EARLY`` leaves no time before the window, and such a
    job ends as its exit says. A job that exited 0 stays Completed (Slurm's ``afterok`` starts
    the runs that wait for it, and astra does not say otherwise)."""
    early = early_signal(template)
    if early is None or obs.slurm_state != "FAILED" or obs.started_at is None or obs.ended_at is None:
        return obs
    signal, grace = early
    limit = template.time_limit_seconds
    window = math.ceil(limit / 60) * 60 - grace - SIGNAL_EARLY  # Slurm's limit: whole minutes
    if window <= 0 or obs.ended_at < obs.started_at + window:
        return obs
    said = obs.reason[:1].lower() + obs.reason[1:]
    words = f"{time_limit_reason(limit)} ({said} after its early {signal})"
    return replace(obs, reason=words, end_kind="timeout")


@dataclass(frozen=True)
class RunStatus:
    state: str
    reason: str
    task_counts: dict[str, int]
    running: int


def _failed_on(worker: str, machine: str | None, reason: str) -> str:
    return msg.WORKER_FAILED_ON.format(worker=worker, machine=machine or "-", reason=reason)


def run_status(
    policy: Policy,
    workers: list[tuple[str, Verdict, str | None, float | None]],
) -> RunStatus:
    """The run's state and reason from its workers: ``(name, verdict, machine, ended_at)``.

    A worker failing for good fails a non-array run at once (and ``FailJob`` an array); an
    array is Failed with the seeds' ``K of N`` reason once every copy has ended.
    """
    counts = Counter(v.state for _, v, _, _ in workers)
    running = counts.get(WorkerState.RUNNING, 0)
    n = len(workers)
    failures = sorted(
        (ended or 0.0, i)
        for i, (_, v, _, ended) in enumerate(workers)
        if v.final and v.state == WorkerState.FAILED
    )
    fatal = [i for i, (_, v, _, _) in enumerate(workers) if v.fails_run]
    first = failures[0][1] if failures else None
    status = dict(sorted(counts.items()))
    if fatal:
        name, v, machine, _ = workers[fatal[0]]
        return RunStatus(RunState.FAILED, _failed_on(name, machine, v.reason), status, running)
    if all(v.final for _, v, _, _ in workers):
        if first is not None:
            name, v, machine, _ = workers[first]
            where = _failed_on(name, machine, v.reason)
            return RunStatus(
                RunState.FAILED,
                msg.ARRAY_FAILED_REASON.format(failed=len(failures), total=n, first=where),
                status,
                running,
            )
        unknown = [v for _, v, _, _ in workers if v.state == UNKNOWN]
        if unknown:
            return RunStatus(RunState.FAILED, unknown[0].reason, status, running)
        if counts.get(WorkerState.STOPPED):
            return RunStatus(RunState.CANCELLED, CANCELLED_OUTSIDE, status, running)
        return RunStatus(RunState.COMPLETED, all_completed(n), status, running)
    if running:
        return RunStatus(RunState.RUNNING, readout(running, n), status, running)
    waiting = [v for _, v, _, _ in workers if not v.final]
    return RunStatus(RunState.PENDING, waiting[0].reason, status, running)


@dataclass(frozen=True)
class GroupRestarts:
    """What the restarts of a run with worker groups cover."""

    #: Every group's job is resubmitted (a new generation), with this restart's count and wait.
    whole: Resubmit | None = None
    #: Only these groups' jobs are resubmitted (``Resubmit.index`` is the group's index).
    groups: tuple[Resubmit, ...] = ()


def group_restarts(
    on_failure: OnFailure, units: list[tuple[Unit, Verdict]], *, one_job: bool, leader: int = 0
) -> GroupRestarts:
    """The seeds' ``on_failure`` over a run's groups, from each group's unit and verdict.

    * ``RestartJob`` (the gangs' default): a group failing (or lost, or preempted) restarts every
      group: the others' jobs are cancelled and all are resubmitted, in ``start_after`` order.
    * ``RestartTask``: only the failed group's job is resubmitted, except that losing the leader's
      group (rank 0, whose node is every worker's MASTER_ADDR) still restarts all.
    * A completion restarted under ``Always`` or a Service restarts that group alone.
    * ``one_job`` (a heterogeneous job): every restart is of the whole job.
    """
    resubmits = [(u, v.resubmit) for u, v in units if v.resubmit is not None]
    if not resubmits:
        return GroupRestarts()
    whole = [
        r
        for u, r in resubmits
        if one_job or (u.obs.end_kind != "ok" and (on_failure == "RestartJob" or u.index == leader))
    ]
    if whole:
        first = max(whole, key=lambda r: (r.restart, r.not_before))
        return GroupRestarts(whole=first)
    return GroupRestarts(groups=tuple(r for _, r in resubmits))
