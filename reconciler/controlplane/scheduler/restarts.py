"""Restarts: what becomes of a worker that ended or ran out of time, and of a run restarted whole.

Owns: settling each ended worker (done for good, restarted after a backoff, or failing its run),
job-level restarts (``restart_run``: RestartJob, a lost gang leader, a gang's barrier), time
limits (the worker is Failed, never restarted), and Stale workers counted as lost once their
machine has been silent for ``STALE_TIMEOUT_SECONDS`` (``stale_workers``: Down, then settled).
The seeds' numbers (the restart limit, the backoff, when the count resets, the Stale timeout)
are the vocabulary's (``reconciler.runspec.vocabulary``).

Must not touch: the records (a tick's phases return decisions through ``Tick.emit``), placement,
clocks (``t.now`` is the tick's), I/O.
"""

from __future__ import annotations

from reconciler.runspec.vocabulary import (
    BACKOFF_START_SECONDS,
    FINAL_RUN_STATES,
    RESTART_LIMIT,
    STALE_TIMEOUT_SECONDS,
    WorkerState,
    backoff_seconds,
    completion_restart_reason,
    lost_after_stale,
    next_restart,
    no_restarts_left,
    restart_reason,
    time_limit_reason,
    worker_failed_on,
)

from ..scopes import shown
from .exitcodes import budget_kept, exit_rule
from .records import (
    ENDED,
    HOLDING,
    LoseWorker,
    MarkWorker,
    RequeueWorker,
    RestartRun,
    RunRecord,
    StopCause,
    StopWorker,
    WorkerRecord,
)
from .ticking import Tick

__all__ = ["next_restart", "restart_run", "settle", "stale_workers", "time_limits"]


def settle(t: Tick) -> None:
    """Decide about each worker that ended since the last tick."""
    s = t.s
    for wname in list(s.unsettled):
        w = s.workers[wname]
        r = s.runs[w.run]
        if r.name in t.frozen:
            continue
        if r.state in FINAL_RUN_STATES:
            t.emit(MarkWorker(w.name, w.state, w.reason, final=True), r.name)
            continue
        completed = w.state is WorkerState.COMPLETED
        if completed and not r.service and t.policy(w) != "Always":
            t.emit(MarkWorker(w.name, w.state, w.reason, final=True), r.name)
        elif completed:
            at = t.now + BACKOFF_START_SECONDS
            why = "it is a Service" if r.service else "restart_policy Always"
            reason = completion_restart_reason(w.reason, why)
            t.emit(RequeueWorker(w.name, at, w.restarts, reason), r.name)
        else:
            _failed(t, w, r)


def _failed(t: Tick, w: WorkerRecord, r: RunRecord) -> None:
    """A worker that failed (or was lost): fail its run, restart the run, or restart the worker;
    a rule of ``on_exit_codes`` naming its exit code decides first (``exitcodes``)."""
    rule = exit_rule(t.s.template(w), w.exit_code) if w.state is WorkerState.FAILED else None
    said = w.reason if rule is None else rule.words
    where = worker_failed_on(shown(w.name), w.machine, said)
    if (rule is not None and rule.action == "FailJob") or (
        rule is None and r.on_failure == "FailJob" and not r.service
    ):
        t.emit(MarkWorker(w.name, w.state, said, final=True), r.name)
        t.fail_run(r, where, skip=w.name)
        return
    if rule is None and t.policy(w) == "Never" and not r.service:
        t.emit(MarkWorker(w.name, w.state, w.reason, final=True), r.name)
        if not r.is_array:
            t.fail_run(r, where, skip=w.name)
        return
    spend = rule is None or rule.action == "Restart"
    gang = r.start == "Gang"
    if not r.is_array and (r.on_failure == "RestartJob" or (gang and w.rank == 0)):
        restart_run(t, r, where, StopCause.RUN_RESTART, w, spend=spend)
        return
    if not spend:
        delay = BACKOFF_START_SECONDS
        t.emit(RequeueWorker(w.name, t.now + delay, w.restarts, budget_kept(said, delay, w.restarts)), r.name)
        return
    ran = (w.ended_at or t.now) - w.started_at if w.started_at is not None else 0
    n = next_restart(ran, w.restarts)
    if n > RESTART_LIMIT and not r.service:
        t.emit(MarkWorker(w.name, w.state, w.reason, final=True), r.name)
        if not r.is_array:
            t.fail_run(r, no_restarts_left(where), skip=w.name)
        return
    delay = backoff_seconds(n)
    t.emit(
        RequeueWorker(w.name, t.now + delay, n, restart_reason(w.reason, n, delay, limited=not r.service)),
        r.name,
    )


def restart_run(
    t: Tick, r: RunRecord, why: str, cause: StopCause, failed: WorkerRecord | None, *, spend: bool = True
) -> None:
    """A job-level restart: every worker back to the queue, the run waiting out its backoff
    (``spend=False``: a rule's ``RestartIgnoreBudget``: the first backoff, no restart counted)."""
    s, now = t.s, t.now
    t.frozen.add(r.name)
    ran = (now - r.running_since) if r.running_since is not None else 0
    n = next_restart(ran, r.restarts) if spend else r.restarts
    if n > RESTART_LIMIT and not r.service and spend:
        t.fail_run(r, no_restarts_left(why))
        return
    at = now + (backoff_seconds(n) if spend else BACKOFF_START_SECONDS)
    for w in s.workers_of(r.name):
        if w is failed or (w.state in ENDED and not w.settled):
            t.emit(RequeueWorker(w.name, at, w.restarts, f"Restarting with the run: {why}"), r.name)
        elif w.state in HOLDING:
            t.emit(
                StopWorker(w.name, cause, WorkerState.PENDING, f"Restarting with the run: {why}", at),
                r.name,
            )
        elif w.state in ENDED:
            t.emit(RequeueWorker(w.name, at, w.restarts, f"Restarting with the run: {why}"), r.name)
    if spend:
        reason = restart_reason(why, n, backoff_seconds(n), limited=not r.service)
    else:
        reason = budget_kept(why, BACKOFF_START_SECONDS, n)
    t.emit(RestartRun(r.name, at, n, reason), r.name)


def stale_workers(t: Tick) -> None:
    """Workers Stale for ``STALE_TIMEOUT_SECONDS`` (their machine still silent): counted as lost,
    Down with the reason in words; the next tick settles them as any lost worker."""
    s = t.s
    if not s.unreachable:
        return
    for machine in sorted(set(s.due(t.now, "stale"))):
        since = s.unreachable.get(machine)
        if since is None or since + STALE_TIMEOUT_SECONDS > t.now:
            continue  # it came back (and may have gone silent again since)
        reason = lost_after_stale(machine)
        for name in list(s.on_machine[machine]):
            w = s.workers[name]
            if w.state is WorkerState.STALE and w.run not in t.frozen:
                t.emit(LoseWorker(name, reason), w.run)


def time_limits(t: Tick) -> None:
    """Workers past their time limit: Failed, never restarted; a non-array run fails with them."""
    s = t.s
    for wname in sorted(set(s.due(t.now, "deadline"))):
        w = s.workers.get(wname)
        if w is None or w.state is not WorkerState.RUNNING or w.run in t.frozen:
            continue
        limit = s.template(w).time_limit_seconds
        if limit is None or w.started_at is None or w.started_at + limit > t.now:
            continue
        r = s.runs[w.run]
        reason = time_limit_reason(limit)
        t.emit(StopWorker(w.name, StopCause.TIME_LIMIT, WorkerState.FAILED, reason), r.name)
        if not r.is_array and not r.service:
            t.fail_run(r, worker_failed_on(shown(w.name), w.machine, reason), skip=w.name)
