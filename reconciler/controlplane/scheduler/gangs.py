"""Start policies while a run runs: the gang barrier, starting prepared workers, groups' start_after.

Owns: releasing prepared workers (``starts``: a gang's all together, once every one is ready),
the gang barrier's time-out (``barriers``: after 15 minutes the gang restarts whole, or fails
under ``Never`` or ``FailJob``), and the order of task groups (``start_after``: a group's workers
wait until the group they follow runs). Which policy a run has is admission's; placing a Gang or
MinAvailable run's first workers together is the queue's.

Must not touch: the records (decisions go through ``Tick.emit``), placement, clocks, I/O.
"""

from __future__ import annotations

from reconciler.runspec.messages import GANG_BARRIER_SECONDS
from reconciler.runspec.models import Spec
from reconciler.runspec.vocabulary import FINAL_RUN_STATES, WorkerState

from .records import RunRecord, StartWorker, StopCause, WorkerRecord
from .restarts import restart_run
from .ticking import Tick

__all__ = ["barriers", "group_wait", "groups_running", "starts"]


def barriers(t: Tick) -> None:
    """Gangs whose barrier timed out with workers not ready: restarted whole, or failed."""
    s = t.s
    for rname in sorted(set(s.due(t.now, "barrier"))):
        r = s.runs.get(rname)
        if r is None or rname in t.frozen or r.state in FINAL_RUN_STATES or r.start != "Gang":
            continue
        if r.placed_at is None or r.placed_at + GANG_BARRIER_SECONDS > t.now:
            continue
        c = s.counts[rname]
        n = len(s.run_workers[rname])
        if c[WorkerState.RUNNING] == n:
            continue
        late = n - c[WorkerState.READY] - c[WorkerState.RUNNING]
        why = f"Gang barrier: {late} of {n} workers not ready after {GANG_BARRIER_SECONDS // 60} minutes"
        policy = s.template(s.workers[s.run_workers[rname][0]]).restart_policy
        if r.on_failure == "FailJob" or (policy == "Never" and not r.service):
            t.fail_run(r, why)
        else:
            restart_run(t, r, why, StopCause.BARRIER, None)


def starts(t: Tick) -> None:
    """Start every prepared worker, but hold a gang's at the barrier until all of them are ready."""
    s = t.s
    # the runs with a ready worker, in the order of ``s.ready`` (submission)
    for rname in sorted(s.readying, key=lambda n: s.runs[n].seq):
        ready = s.ready[rname]
        if not ready or rname in t.frozen:
            continue
        r = s.runs[rname]
        if r.state in FINAL_RUN_STATES:
            continue
        c = s.counts[rname]
        if (
            r.start == "Gang"
            and c[WorkerState.RUNNING] == 0
            and c[WorkerState.READY] < len(s.run_workers[rname])
        ):
            continue  # the barrier holds until every worker is ready
        for wname in list(ready):
            t.emit(StartWorker(wname), rname)


def groups_running(t: Tick, r: RunRecord) -> dict[str, bool]:
    """For each task group of ``r``: whether every one of its workers runs."""
    out: dict[str, bool] = {}
    for w in t.s.workers_of(r.name):
        assert w.group is not None
        out[w.group] = out.get(w.group, True) and w.state is WorkerState.RUNNING
    return out


def group_wait(spec: Spec, w: WorkerRecord, running: dict[str, bool]) -> str | None:
    """Why ``w`` waits for the group its group starts after (``None``: it need not wait)."""
    after = next(g.start_after for g in spec.task_groups or () if g.name == w.group)
    if after and not running.get(after):
        return f"Waiting for group {after} to run"
    return None
