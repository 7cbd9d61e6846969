"""The queue: which run is served next, and placing what of it can be placed now.

Owns: the placement phase of a tick: runs served by priority, then submission; admission of new
runs; a run whose shape is chosen now; a Gang's (or MinAvailable's first) workers placed together;
other workers one by one, within an array's cap, a group's ``start_after`` and the run's network
constraint; and the reason a run (and its next waiting worker) waits (a run with drives, where
no sandbox can mount them, waits with ``ClusterState.no_sandbox``). Backfill and preemption
are ``priorities``'; where workers fit is ``placement``'s.

Must not touch: the records (decisions go through ``Tick.emit``), clocks, I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reconciler.runspec.vocabulary import FINAL_RUN_STATES, RunState, WorkerState

from ..inventory import Machine
from .admission import admit, templates_of
from .arrays import at_cap, parallel_cap
from .gangs import group_wait, groups_running
from .netgroups import NetGroup, containing, region, union
from .placement import Net, View, fixed, label, place_decision, search
from .priorities import may_backfill, preempt_for
from .quotas import held_by_quota, run_named
from .records import Ask, MarkRun, MarkWorker, NewWorker, RunRecord, ask_of

if TYPE_CHECKING:
    from .tick import Tick

__all__ = [
    "Held",
    "allowed",
    "has_drives",
    "one_fit",
    "place_each",
    "place_run",
    "place_together",
    "placement",
    "set_run_reason",
]


@dataclass(frozen=True, slots=True)
class Held:
    """A run (or its next worker) held by its workspace's quota: it waits with ``reason``, and,
    unlike a run blocked for room, holds back no run queued behind it. ``marked``: the waiting
    worker has its reason already."""

    reason: str
    marked: bool = False


def placement(t: Tick) -> None:
    """Serve the active runs by priority, then submission: admit new ones, place the rest."""
    s = t.s
    order = sorted(s.active, key=lambda n: (-s.runs[n].priority, s.runs[n].seq))
    for rname in order:
        r = s.runs[rname]
        if rname in t.frozen or r.cancel_requested or r.state in FINAL_RUN_STATES:
            continue
        if not r.admitted:
            for d in admit(s, r, t.memo):
                t.emit(d, rname)
            continue
        if r.not_before is not None and r.not_before > t.now:
            continue
        if not s.pending[rname] and s.run_workers[rname]:
            continue
        if s.no_sandbox is not None and has_drives(r):
            set_run_reason(t, r, s.no_sandbox)
            continue
        if t.blocker is not None and not may_backfill(t, r):
            set_run_reason(t, r, f"Waiting behind {run_named(t.blocker.name, rname)}, queued ahead of it")
            continue
        blocked = place_run(t, r)
        if isinstance(blocked, Held):
            set_run_reason(t, r, blocked.reason, head=not blocked.marked)
        elif blocked is not None:
            set_run_reason(t, r, blocked)
            if t.blocker is None:
                t.blocker = r


def has_drives(r: RunRecord) -> bool:
    """Whether a worker of ``r`` mounts a drive (``datavolume_refs``)."""
    return any(tt.datavolume_refs for tt in templates_of(r.run))


def set_run_reason(t: Tick, r: RunRecord, reason: str, *, head: bool = True) -> None:
    """A waiting run's reason, on the run and (``head``) on its next waiting worker."""
    if any(run == r.name for run, _ in t.placed):
        return  # it placed workers this tick: not waiting as a whole
    if r.state is RunState.PENDING and r.reason != reason and r.name not in t.marked:
        t.emit(MarkRun(r.name, RunState.PENDING, reason), r.name)
    if not head:
        return
    head_worker = next(iter(t.s.pending[r.name]), None)
    if head_worker is not None and t.s.workers[head_worker].reason != reason:
        t.emit(MarkWorker(head_worker, WorkerState.PENDING, reason), r.name)


def place_run(t: Tick, r: RunRecord) -> str | Held | None:
    """Place what can be placed now; the reason it waits when blocked for room (``Held``: by its
    workspace's quota), else None."""
    s, view, rname = t.s, t.view, r.name
    net = Net.of(r.run)
    if not s.run_workers[rname]:  # the shape is chosen now
        tt = r.run.spec.task_template
        assert tt and tt.requested_resources and tt.requested_resources.gpu_requests
        gr = tt.requested_resources.gpu_requests
        ask = ask_of(tt)
        k_min = gr.min_per_machine or 1
        held = held_by_quota(t, r, gr.count)
        if held is not None:
            return Held(held)
        got = t.memo.shape(view, ask, gr.count, k_min, net)
        if got is None and preempt_for(t, r, lambda v: search(v, ask, gr.count, k_min, net, t.memo)):
            got = t.memo.shape(view, ask, gr.count, k_min, net)
        if got is None:
            return f"Waiting for room: {gr.count} GPUs{label(ask)} on one network"
        k = len(got)
        for rank, (m, g) in enumerate(got):
            new = NewWorker(f"{rname}-{rank}", rname, rank, k, ask.with_gpus(g))
            t.emit(place_decision(view, new.name, m, new.ask, g, new), rname)
        return None
    now = t.now
    # lazily: an array stops reading its waiting copies once its cap is reached
    eligible: Iterator[str] = (n for n in s.pending[rname] if (s.workers[n].not_before or 0) <= now)
    holding = s.holding(rname)
    every: tuple[NetGroup, ...] | None = None
    groups: tuple[NetGroup, ...] | None = None
    if net.constrained:
        every, groups = region(s, view, r, net, t.placed, parallel_cap(r.run.spec))
    if r.start in ("Gang", "MinAvailable") and holding == 0:
        need = len(s.run_workers[rname]) if r.start == "Gang" else (r.run.spec.min_available or 1)
        first = list(itertools.islice(eligible, need))
        if len(first) < need:
            return None
        held = held_by_quota(t, r, sum(s.workers[n].ask.gpus for n in first))
        if held is not None:
            return Held(held)
        together = place_together(t, r, first, net, groups, every)
        if isinstance(together, str):
            return together
        if r.start == "Gang":
            return None
        holding += need
        if every is not None:
            groups = containing(every, together)
    return place_each(t, r, eligible, holding, groups)


def place_together(
    t: Tick,
    r: RunRecord,
    first: list[str],
    net: Net,
    groups: tuple[NetGroup, ...] | None,
    every: tuple[NetGroup, ...] | None,
) -> str | set[str]:
    """A Gang's workers (or MinAvailable's first ones) placed together: their machines, or why not.

    ``groups``: where a constrained run may start (``netgroups.region``); preemption may make
    room in any of ``every`` candidate.
    """
    s, view = t.s, t.view
    asks = [(n, s.workers[n].ask) for n in first]
    distinct = r.run.spec.task_groups is None
    got = t.memo.fixed(view, asks, net, distinct, groups)
    if got is None and preempt_for(t, r, lambda v: fixed(v, asks, net, distinct, every)):
        got = t.memo.fixed(view, asks, net, distinct, every)
    if got is None:
        return "Waiting for room: " + (
            "every worker together" if r.start == "Gang" else f"{len(first)} workers together"
        )
    for wname, m in got:
        w = s.workers[wname]
        t.emit(place_decision(view, wname, m, w.ask, w.ask.gpus), r.name)
    return {m.name for _, m in got}


def place_each(
    t: Tick, r: RunRecord, eligible: Iterator[str], holding: int, groups: tuple[NetGroup, ...] | None
) -> str | Held | None:
    """Place waiting workers one by one, each on the fullest machine that fits and is allowed.

    ``groups``: for a run with a network constraint, the groups its workers may go into (each
    placement keeps only those holding it, so that the run stays within one); ``None``: any.
    """
    s, view, rname = t.s, t.view, r.name
    spec = r.run.spec
    cap = parallel_cap(spec)
    distinct = spec.array is None and spec.task_groups is None
    within = union(groups) if groups is not None else None
    group_running = groups_running(t, r) if spec.task_groups else None
    cand: Iterator[Machine] | None = None
    current: Machine | None = None
    last_ask: Ask | None = None
    for wname in eligible:
        w = s.workers[wname]
        if cap is not None and holding >= cap:
            mark = at_cap(w, cap)
            if mark is not None:
                t.emit(mark, rname)
            return None
        if group_running is not None and w.group is not None:
            reason = group_wait(spec, w, group_running)
            if reason is not None:
                if w.reason != reason:
                    t.emit(MarkWorker(wname, WorkerState.PENDING, reason), rname)
                continue
        ask = w.ask
        held = held_by_quota(t, r, ask.gpus)
        if held is not None:
            if w.reason != held:
                t.emit(MarkWorker(wname, WorkerState.PENDING, held), rname)
            return Held(held, marked=True)
        if ask != last_ask:
            cand, current, last_ask = view.candidates(ask.gpus), None, ask
        assert cand is not None
        pick = None
        while True:
            if (
                current is not None
                and view.fits(current, ask, ask.gpus)
                and allowed(t, current, r, within, distinct)
            ):
                pick = current
                break
            current = next(cand, None)
            if current is None:
                break

        def fit_in(v: View, a: Ask = ask, wi: Any = within) -> Any:
            return one_fit(t, v, a, r, wi, distinct)

        if pick is None and preempt_for(t, r, fit_in):
            pick = one_fit(t, view, ask, r, within, distinct)
        if pick is None:
            cores = ask.cores(ask.gpus)
            return f"Waiting for room: {ask.gpus} GPUs{label(ask)}, {cores} cores on one machine"
        t.emit(place_decision(view, wname, pick, ask, ask.gpus), rname)
        if groups is not None:
            kept = tuple(g for g in groups if pick.name in g.names)
            if len(kept) != len(groups):
                groups, within = kept, union(kept)
        if distinct:
            current = None
        holding += 1
    return None


def allowed(t: Tick, m: Machine, r: RunRecord, within: frozenset[str] | None, distinct: bool) -> bool:
    """Whether a worker of ``r`` may go on ``m``: within its network groups, one per machine."""
    if within is not None and m.name not in within:
        return False
    if distinct:
        if (r.name, m.name) in t.placed:
            return False
        return not any(t.s.workers[n].run == r.name for n in t.s.on_machine[m.name])
    return True


def one_fit(
    t: Tick, view: View, ask: Ask, r: RunRecord, within: frozenset[str] | None, distinct: bool
) -> Machine | None:
    """The first machine of ``view`` where one worker of ``r`` with ``ask`` fits and is allowed."""
    for m in view.candidates(ask.gpus):
        if view.fits(m, ask, ask.gpus) and allowed(t, m, r, within, distinct):
            return m
    return None
