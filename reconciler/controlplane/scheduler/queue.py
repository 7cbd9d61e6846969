"""The queue: which run is served next, and placing what of it can be placed now.

Owns: the placement phase of a tick: runs served by priority, then submission; admission of new
runs; a run whose shape is chosen now; a Gang's (or MinAvailable's first) workers placed
together; other workers one by one, within an array's cap, a group's ``start_after`` and the
run's network constraint; and the reason a run (and its next waiting worker) waits (a run with
drives, where no sandbox can mount them, waits with ``ClusterState.no_sandbox``; one that names
something that does not exist yet (a drive, a secret), with ``ClusterState.waiting``'s words, on
every waiting worker, which say they are queued again once the wait is over). Backfill and
preemption are ``priorities``'; a tick given ``Admissions`` admits runs until they are spent,
then stops at the next run to admit (``ticking.Admissions``); where workers fit is
``placement``'s; which waiting runs a tick may pass over, and why, is ``quiet``'s (the queue
says what each visit found: ``Room``, ``Held``, ``quiet.Wait``).

Must not touch: the records (decisions go through ``Tick.emit``), clocks, I/O.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from reconciler.runspec.vocabulary import FINAL_RUN_STATES, QUEUED, RunState, WorkerState

from ..inventory import Machine
from .admission import admit, templates_of
from .arrays import at_cap, parallel_cap
from .dependencies import blocked_by
from .gangs import group_wait, groups_running
from .netgroups import NetGroup, containing, region, union
from .passover import holds
from .placement import Net, View, fixed, label, place_decision, search
from .priorities import backfill_limit, may_backfill, preempt_for
from .quiet import Wait, Why
from .quotas import held_by_quota, run_named
from .records import AdmitRun, Ask, MarkRun, MarkWorker, NewWorker, RunRecord, ask_of
from .ticking import Tick

__all__ = [
    "Held",
    "Room",
    "allowed",
    "has_drives",
    "one_fit",
    "place_each",
    "place_run",
    "place_together",
    "placement",
    "serve",
    "set_run_reason",
]


@dataclass(frozen=True, slots=True)
class Room:
    """A run (or its next worker) blocked for room: the reason it waits, and its least need: with
    fewer than ``gpus`` free GPUs (healthy ones, with ``healthy``) over the usable machines, every
    search for its room fails at its first check (``placement.Memo``, ``View.fits``)."""

    reason: str
    gpus: int
    healthy: bool


@dataclass(frozen=True, slots=True)
class Held:
    """A run (or its next worker) held by its workspace's quota: it waits with ``reason``, and,
    unlike a run blocked for room, holds back no run queued behind it. ``gpus``: what it asked
    when held (the memo asks the quota again with it: ``passover``); ``marked``: the waiting
    worker has its reason already."""

    reason: str
    gpus: int
    marked: bool = False


def placement(t: Tick) -> None:
    """Serve the active runs by priority, then submission: admit new ones, place the rest.

    With the tick's memo (``Tick.quiet``), a run whose last visit changed nothing, and whose
    answer cannot have changed since, is passed over (``quiet``); the others are served as
    without it, and what their visit found is kept for the next tick."""
    s, quiet = t.s, t.quiet
    if quiet is None:
        for rname in sorted(s.active, key=lambda n: (-s.runs[n].priority, s.runs[n].seq)):
            serve(t, s.runs[rname])
            if t.admissions is not None and t.admissions.cut:
                return
        return
    out, moved, touched = t.out, quiet.moved, t.touched
    order = quiet.order(s.runs, s.active, s.order_version)
    slots = quiet.slots
    known = None  # a reason found to hold: it holds for the next runs alike, until one is served
    for at, rname in enumerate(order):  # (a run finished since it was sorted: served, it does nothing)
        why = slots[at]
        if why is not None and rname not in moved and rname not in touched:
            if why is known:
                continue
            blocker = t.blocker
            if holds(t, why, rname):
                known = why if t.blocker is blocker else None
                continue
        known = None
        emitted = len(out)
        r = s.runs[rname]
        found = serve(t, r)
        if t.admissions is not None and t.admissions.cut:  # no run after it is served this tick
            quiet.looked(order[:at])
            return
        still = found is not None and len(out) == emitted  # it waits, and its visit changed nothing
        quiet.learn(at, rname, _why(t, r, found) if still else None)
    quiet.looked()


def serve(t: Tick, r: RunRecord) -> Wait | Room | Held | None:
    """One run's turn: admit it, or place what can be placed now, or say why it waits. What it
    waits for, where the memo can hold that (``quiet.Wait``, or ``Room``), else ``None``."""
    s, rname = t.s, r.name
    if rname in t.frozen or r.cancel_requested or r.state in FINAL_RUN_STATES:
        return None
    if not r.admitted:
        left = t.admissions
        if left is not None and left.left <= 0:
            left.cut = True
            return None
        for d in admit(s, r, t.memo):
            t.emit(d, rname)
            if left is not None and isinstance(d, AdmitRun):
                left.left -= left.per_run + len(d.workers)
        return None
    if r.not_before is not None and r.not_before > t.now:
        return None
    if not s.pending[rname] and s.run_workers[rname]:
        return None
    on_runs = blocked_by(s, r)
    if on_runs is not None and on_runs[1]:  # a dependency that can no longer be met
        t.fail_run(r, on_runs[0])
        return None
    waits = on_runs[0] if on_runs is not None else s.waiting.get(rname)
    if waits is not None:  # for a run, or something that does not exist yet: every waiting worker says so
        set_run_reason(t, r, waits)
        for w in itertools.islice(s.pending[rname], 1, None):
            if s.workers[w].reason != waits:
                t.emit(MarkWorker(w, WorkerState.PENDING, waits), rname)
        return None
    _unsay_wait(t, r)
    if s.no_sandbox is not None and has_drives(r):
        set_run_reason(t, r, s.no_sandbox)
        return Wait.NO_SANDBOX
    if t.blocker is not None and not may_backfill(t, r):
        set_run_reason(t, r, f"Waiting behind {run_named(t.blocker.name, rname)}, queued ahead of it")
        return Wait.BEHIND
    t.until = math.inf
    blocked = place_run(t, r)
    if isinstance(blocked, Held):
        set_run_reason(t, r, blocked.reason, head=not blocked.marked)
        return blocked
    if blocked is not None:
        set_run_reason(t, r, blocked.reason)
        if t.blocker is None:
            t.blocker = r
        return blocked
    return None


def _why(t: Tick, r: RunRecord, found: Wait | Room | Held | None) -> Why | None:
    """What the memo keeps of a visit of ``r`` that emitted nothing and found ``found`` (``None``:
    nothing: a run held by its quota that depends on runs is visited each tick)."""
    if found is Wait.NO_SANDBOX:
        return Why(found, reason=t.s.no_sandbox)
    ws, limit = t.s.ws_of[r.name], backfill_limit(r)
    if isinstance(found, Held):
        if r.run.spec.depends_on:
            return None
        starting = t.s.holding(r.name) == 0
        return Why(
            Wait.QUOTA,
            ws,
            limit,
            r.priority,
            gpus=found.gpus,
            until=t.until,
            reason=found.reason,
            starting=starting,
        )
    if found is Wait.BEHIND:
        assert t.blocker is not None
        return Why(found, ws, limit, r.priority, blocker=t.blocker.name)
    assert isinstance(found, Room)
    return Why(Wait.ROOM, ws, limit, r.priority, gpus=found.gpus, healthy=found.healthy, until=t.until)


def _unsay_wait(t: Tick, r: RunRecord) -> None:
    """A run whose wait is over (the run it waited for ended as asked, the drive is made): its
    waiting workers, which all said the wait, say they are queued again (placement then marks
    the next one, at an array's cap or for room). Told by the second waiting worker still saying
    the run's own reason, which only a wait gives every waiting worker."""
    queue = t.s.pending[r.name]
    second = next(itertools.islice(queue, 1, 2), None)
    if second is None or r.reason == QUEUED or t.s.workers[second].reason != r.reason:
        return
    for w in queue:
        if t.s.workers[w].reason == r.reason:
            t.emit(MarkWorker(w, WorkerState.PENDING, QUEUED), r.name)


def has_drives(r: RunRecord) -> bool:
    """Whether a worker of ``r`` mounts a drive (``datavolume_refs``)."""
    return any(tt.datavolume_refs for tt in templates_of(r.run))


def set_run_reason(t: Tick, r: RunRecord, reason: str, *, head: bool = True) -> None:
    """A waiting run's reason, on the run and (``head``) on its next waiting worker."""
    if r.name in t.placed_runs:
        return  # it placed workers this tick: not waiting as a whole
    if r.state is RunState.PENDING and r.reason != reason and r.name not in t.marked:
        t.emit(MarkRun(r.name, RunState.PENDING, reason), r.name)
    if not head:
        return
    head_worker = next(iter(t.s.pending[r.name]), None)
    if head_worker is not None and t.s.workers[head_worker].reason != reason:
        t.emit(MarkWorker(head_worker, WorkerState.PENDING, reason), r.name)


def place_run(t: Tick, r: RunRecord) -> Room | Held | None:
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
            return Held(held, gr.count)
        got = t.memo.shape(view, ask, gr.count, k_min, net)
        if got is None and preempt_for(t, r, lambda v: search(v, ask, gr.count, k_min, net, t.memo)):
            got = t.memo.shape(view, ask, gr.count, k_min, net)
        if got is None:
            reason = f"Waiting for room: {gr.count} GPUs{label(ask)} on one network"
            return Room(reason, gr.count, ask.healthy_only)
        k = len(got)
        for rank, (m, g) in enumerate(got):
            new = NewWorker(f"{rname}-{rank}", rname, rank, k, ask.with_gpus(g))
            t.emit(place_decision(view, new.name, m, new.ask, g, new), rname)
        return None
    # lazily: an array stops reading its waiting copies once its cap is reached
    eligible = _eligible(t, rname)
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
        gpus = sum(s.workers[n].ask.gpus for n in first)
        held = held_by_quota(t, r, gpus)
        if held is not None:
            return Held(held, gpus)
        together = place_together(t, r, first, net, groups, every)
        if isinstance(together, Room):
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
) -> Room | set[str]:
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
        reason = "Waiting for room: " + (
            "every worker together" if r.start == "Gang" else f"{len(first)} workers together"
        )
        return Room(reason, sum(a.gpus for _, a in asks), all(a.healthy_only for _, a in asks))
    for wname, m in got:
        w = s.workers[wname]
        t.emit(place_decision(view, wname, m, w.ask, w.ask.gpus), r.name)
    return {m.name for _, m in got}


def place_each(
    t: Tick, r: RunRecord, eligible: Iterator[str], holding: int, groups: tuple[NetGroup, ...] | None
) -> Room | Held | None:
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
    cursor = _Cursor(t, r, distinct)
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
            return Held(held, ask.gpus, marked=True)
        pick = cursor.fit(ask, within)

        def fit_in(v: View, a: Ask = ask, wi: Any = within) -> Any:
            return one_fit(t, v, a, r, wi, distinct)

        if pick is None and preempt_for(t, r, fit_in):
            pick = one_fit(t, view, ask, r, within, distinct)
        if pick is None:
            cores = ask.cores(ask.gpus)
            reason = f"Waiting for room: {ask.gpus} GPUs{label(ask)}, {cores} cores on one machine"
            return Room(reason, ask.gpus, ask.healthy_only)
        t.emit(place_decision(view, wname, pick, ask, ask.gpus), rname)
        if groups is not None:
            kept = tuple(g for g in groups if pick.name in g.names)
            if len(kept) != len(groups):
                groups, within = kept, union(kept)
        if distinct:
            cursor.current = None  # one worker a machine: the next one tries the next machine
        holding += 1
    return None


class _Cursor:
    """Where ``place_each`` looks for room for a run's workers: the machines with room for an ask,
    fullest first (``View.candidates``), kept from one worker to the next of the same ask, so
    that alike workers are packed onto the machine that took the last one and every machine is
    looked at once per run, not once per worker."""

    __slots__ = ("ask", "current", "distinct", "machines", "r", "t")

    def __init__(self, t: Tick, r: RunRecord, distinct: bool) -> None:
        self.t, self.r, self.distinct = t, r, distinct
        self.ask: Ask | None = None
        self.machines: Iterator[Machine] = iter(())
        #: The machine tried first for the next worker (the one that took the last).
        self.current: Machine | None = None

    def fit(self, ask: Ask, within: frozenset[str] | None) -> Machine | None:
        """The first machine, from the current one on, where one worker of ``ask`` fits and is
        allowed (``allowed``), or ``None``: none is left."""
        t, view = self.t, self.t.view
        if ask != self.ask:
            self.machines, self.current, self.ask = view.candidates(ask.gpus), None, ask
        while True:
            m = self.current
            if m is not None and view.fits(m, ask, ask.gpus) and allowed(t, m, self.r, within, self.distinct):
                return m
            self.current = next(self.machines, None)
            if self.current is None:
                return None


def _eligible(t: Tick, rname: str) -> Iterator[str]:
    """``rname``'s waiting workers that may be placed now (their backoff over), in order; the
    earliest a skipped one may be placed is kept in ``Tick.until`` (for the memo, ``quiet``)."""
    now, workers = t.now, t.s.workers
    for n in t.s.pending[rname]:
        at = workers[n].not_before or 0
        if at <= now:
            yield n
        elif at < t.until:
            t.until = at


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
