"""Quiet runs: the runs a tick may pass over, because their last visit changed nothing and cannot now.

Owns ``Quiet``, the memo a ``ClusterState`` keeps across ticks (``state.quiet``): the queue's order
(by priority, then submission: sorted once per change to it, not once a tick); for each waiting
run whose last visit by the placement phase emitted nothing, why it waited (``Why``: one object
for all the runs that waited alike), kept beside the order (``slots``), until the run changes
(``moved``: the runs changed since the placement phase last looked, which the state adds to,
``ClusterState._touch``); and the runs changed since ``tick.run_states`` last found their state
and reason right (``stale``: only those are looked at again, their state and reason coming from
their own records alone).

A tick visited each waiting run in about 20 µs: 3.5 s a tick at 100,000 waiting runs, though
nothing changed for almost all of them. A run is passed over (in well under a microsecond) when
its own records have not changed since its last visit, nothing in this tick touched it, and what
this tick sees of the rest still gives the answer that visit gave, by the reason it waited:

==========  ===============================================================================
behind B    the run blocked for room is B again, and this run still may not backfill
            (``priorities.may_backfill``: its longest time limit against this tick's shadow)
room        fewer GPUs are free now, over the usable machines, than its least need (the first
            check of every search for room, ``placement.Memo``, and of each machine's fit); no
            worker of it became eligible since (``until``); no quota (nor spent budget) holds its workspace;
            nothing of lower priority holds a machine (no preemption); and either no run is
            blocked yet (this one is, again: ``Tick.blocker``) or it may backfill
no sandbox  the same ``ClusterState.no_sandbox``
==========  ===============================================================================

Every other run is visited as before, and a run passed over emits nothing and leaves the tick as
a visit would (the blocked run set, the shadow estimated at the same run). A reason found to
hold is not checked again for the runs alike that follow, until a run is visited. The memo is a
cache: no decision depends on it. ``plan_tick(state, now, quiet=False)`` decides without it, and
the tests hold both paths to the same decisions, tick by tick, on random clusters.

What a tick cannot pass over, though: when the run blocked for room changes, every run waiting
behind it gets the new reason (it names that run), one decision each.

Must not touch: the records, clocks (``now`` is the tick's), I/O. Only a tick writes the memo, but
for ``stale`` and ``moved``, which the state adds each run it changes to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .state import ClusterState
    from .tick import Tick

__all__ = ["Quiet", "Wait", "Why"]


class Wait(Enum):
    """Why a run waited at its last visit, where that can be held without visiting it again."""

    BEHIND = "behind"
    ROOM = "room"
    NO_SANDBOX = "no sandbox"


@dataclass(frozen=True, slots=True)
class Why:
    """Why a run waited at its last quiet visit, and what holds that answer (one object for all
    the runs that waited alike: ``Quiet.why``).

    ``limit``: the run's longest time limit (``None``: a template has none, so it never
    backfills); ``blocker``: the run it waited behind; ``gpus``/``healthy``: its least need when
    it waited for room (free GPUs, healthy ones only with ``healthy``); ``until``: when a worker
    it skipped as not yet eligible becomes eligible; ``reason``: the no-sandbox reason.
    """

    wait: Wait
    workspace: str = ""
    limit: float | None = None
    priority: int = 0
    blocker: str | None = None
    gpus: int = 0
    healthy: bool = False
    until: float = math.inf
    reason: str | None = None


class Quiet:
    """What ticks learned of the runs, kept across ticks (see the module docstring)."""

    def __init__(self) -> None:
        #: run → why it waited at its last quiet visit (``slots``: the same, in the order's places)
        self.entries: dict[str, Why] = {}
        self.slots: list[Why | None] = []
        #: runs changed since the placement phase last looked (``entries`` of them hold no more)
        self.moved: dict[str, None] = {}
        #: runs changed since ``run_states`` last found their state and reason right
        self.stale: dict[str, None] = {}
        self._whys: dict[Why, Why] = {}
        self._order: list[str] = []
        self._order_at = -1

    def order(self, s: ClusterState) -> list[str]:
        """The active runs by priority, then submission (and runs finished since it was sorted)."""
        if self._order_at != s.order_version or len(self._order) > 2 * len(s.active) + 64:
            runs = s.runs
            self._order = sorted(s.active, key=lambda n: (-runs[n].priority, runs[n].seq))
            self._order_at = s.order_version
            if len(self.entries) > len(s.active):
                self.entries = {n: e for n, e in self.entries.items() if n in s.active}
                self._whys = {w: w for w in self.entries.values()}
            self.slots = [self.entries.get(n) for n in self._order]
        return self._order

    def holds(self, t: Tick, why: Why, name: str) -> bool:
        """Whether ``why``, from the last visit of run ``name`` (unchanged since, untouched by this
        tick), holds now: the run may be passed over (its visit would emit nothing, and leave the
        tick as it is, but for being the blocked run, which is then set)."""
        wait = why.wait
        s = t.s
        if wait is Wait.NO_SANDBOX:
            return why.reason == s.no_sandbox
        b = t.blocker
        limit = why.limit
        # may it backfill (``priorities.may_backfill``; the shadow is estimated at the same run)
        may = b is not None and limit is not None and t.now + limit <= (t.shadow_at or t.shadow())
        if wait is Wait.BEHIND:
            return b is not None and not may and b.name == why.blocker
        if (b is not None and not may) or t.now >= why.until or why.priority > t.lowest:
            return False
        if why.workspace in s.quotas or why.workspace in s.spent or t.view.free_gpus(why.healthy) >= why.gpus:
            return False
        if b is None:
            t.blocker = s.runs[name]
        return True

    def learn(self, at: int, name: str, why: Why | None) -> None:
        """Keep (or, ``None``, forget) what the visit of ``name`` (the ``at``-th of the order)
        that just ended found."""
        if why is None:
            self.entries.pop(name, None)
            self.slots[at] = None
            return
        whys = self._whys
        if len(whys) > 2 * len(self.entries) + 1024:  # reasons no run waits for any more go
            whys = self._whys = {w: w for w in self.entries.values()}
        why = whys.setdefault(why, why)
        self.entries[name] = self.slots[at] = why

    def looked(self) -> None:
        """The placement phase looked at every run changed since it last did (or passed it over)."""
        self.moved.clear()
