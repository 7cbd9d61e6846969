"""Priorities: backfill behind the first blocked run, and preemption of lower-priority workers.

Owns: whether a later run may start while an earlier one is blocked for room (``may_backfill``:
only if every worker states a time limit and it ends before the blocked run could start, that
start estimated from the running workers' time limits: ``shadow``), and ``preempt_for``: stopping
workers of strictly lower priority so that a placement succeeds (a gang's or a RestartJob run's
other workers go back to the queue with them; their restart counts stay untouched).

Must not touch: the records (decisions go through ``Tick.emit``), the order runs are served in
(the queue's), clocks, I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from reconciler.runspec.vocabulary import WorkerState

from ..scopes import other_workspace, shown
from .admission import templates_of
from .placement import Net, View, machines_of, search
from .records import HOLDING, RunRecord, StopCause, StopWorker, WorkerRecord, ask_of
from .ticking import Tick

__all__ = ["INF", "backfill_limit", "fits_somehow", "may_backfill", "preempt_for", "shadow"]

INF = math.inf


def backfill_limit(r: RunRecord) -> float | None:
    """The longest time limit of ``r``'s workers; ``None`` when one has none (it never backfills)."""
    limits = [tt.time_limit_seconds for tt in templates_of(r.run)]
    known = [x for x in limits if x is not None]
    if len(known) < len(limits):
        return None
    return max(known)


def may_backfill(t: Tick, r: RunRecord) -> bool:
    """Whether ``r`` may start now, ahead of the blocked run, and end before that one could start."""
    limit = backfill_limit(r)
    return limit is not None and t.now + limit <= shadow(t)


def shadow(t: Tick) -> float:
    """When the blocked run could start, if running workers end at their time limits."""
    if t.shadow_at is not None:
        return t.shadow_at
    s, b = t.s, t.blocker
    assert b is not None
    ends = []
    # the workers holding machines (``on_machine``: of the active runs, in any order: sorted next)
    for names in s.on_machine.values():
        for n in names:
            w = s.workers[n]
            if w.run in s.active and w.state in HOLDING:
                limit = s.template(w).time_limit_seconds
                end = INF if limit is None else (w.started_at or t.now) + limit
                ends.append((end, w.name))
    ends.sort()
    view = View(s)
    view.over = dict(t.view.over)
    t.shadow_at = INF
    for end, wname in ends:
        if end == INF:
            break
        view.give(s.workers[wname])
        if fits_somehow(t, b, view):
            t.shadow_at = end
            break
    return t.shadow_at


def fits_somehow(t: Tick, r: RunRecord, view: View) -> bool:
    """Whether ``r``'s shape, or its next waiting worker, fits in ``view``."""
    s = t.s
    net = Net.of(r.run)
    if not s.run_workers[r.name]:
        tt = r.run.spec.task_template
        assert tt and tt.requested_resources and tt.requested_resources.gpu_requests
        gr = tt.requested_resources.gpu_requests
        return search(view, ask_of(tt), gr.count, gr.min_per_machine or 1, net, t.memo) is not None
    head = next(iter(s.pending[r.name]), None)
    if head is None:
        return True
    w = s.workers[head]
    return any(view.fits(m, w.ask, w.ask.gpus) for m in view.candidates(w.ask.gpus))


def preempt_for(t: Tick, r: RunRecord, place: Callable[[View], Any]) -> bool:
    """Stop lower-priority workers so that ``place(view)`` succeeds; True when it now does."""
    s = t.s
    if not s.holding_priorities or min(s.holding_priorities) >= r.priority:
        return False
    lower = [
        s.workers[n]
        for m in s.on_machine.values()
        for n in m
        if s.runs[s.workers[n].run].priority < r.priority and s.workers[n].run not in t.touched
    ]
    if not lower:
        return False
    trial = View(s)
    trial.over = dict(t.view.over)
    for w in lower:
        trial.give(w)
    got = place(trial)
    if got is None:
        return False
    machines = machines_of(got)
    victims: dict[str, WorkerRecord] = {}
    for w in sorted(lower, key=lambda w: (s.runs[w.run].priority, -(w.started_at or 0))):
        if w.machine not in machines:
            continue
        victims[w.name] = w
        vr = s.runs[w.run]
        if vr.start == "Gang" or (vr.on_failure == "RestartJob" and not vr.is_array):
            for other in s.workers_of(vr.name):
                if other.state in HOLDING:
                    victims[other.name] = other
        check = View(s)
        check.over = dict(t.view.over)
        for v in victims.values():
            check.give(v)
        if place(check) is not None:
            break
    for v in victims.values():
        t.view.give(v)
        elsewhere = other_workspace(r.name, v.run)
        for_ = (
            f"higher-priority run {shown(r.name)}"
            if elsewhere is None
            else f"a higher-priority run of workspace {elsewhere}"
        )
        reason = f"Preempted for {for_}; back in the queue"
        t.emit(StopWorker(v.name, StopCause.PREEMPTED, WorkerState.PENDING, reason), v.run)
    return True
