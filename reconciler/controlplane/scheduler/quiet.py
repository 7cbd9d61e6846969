"""Quiet runs: what ticks learned of the runs whose last visit changed nothing, kept across ticks.

Owns ``Quiet``, the memo a ``ClusterState`` keeps across ticks (``state.quiet``): the queue's order
(by priority, then submission: sorted once per change to it, not once a tick); for each waiting
run whose last visit by the placement phase emitted nothing, why it waited (``Why``: one object
for all the runs that waited alike), kept beside the order (``slots``), until the run changes
(``moved``: the runs changed since the placement phase last looked, which the state adds to,
``ClusterState._touch``); and the runs changed since ``runstates.run_states`` last found their
state and reason right (``stale``: only those are looked at again, their state and reason coming
from their own records alone).

A tick visited each waiting run in about 20 µs: 3.5 s a tick at 100,000 waiting runs, though
nothing changed for almost all of them. Whether a run kept here may be passed over by this tick
is ``passover``'s rule (``passover.holds``), which the queue asks. The memo is a cache: no
decision depends on it. ``plan_tick(state, now, quiet=False)`` decides without it, and the tests
hold both paths to the same decisions, tick by tick, on random clusters.

It is plain data, below the state that keeps it: it imports nothing of the scheduler but the
records.

Must not touch: the records, clocks, I/O. Only a tick writes the memo, but for ``stale`` and
``moved``, which the state adds each run it changes to.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from .records import RunRecord

__all__ = ["Quiet", "Wait", "Why"]


class Wait(Enum):
    """Why a run waited at its last visit, where that can be held without visiting it again."""

    BEHIND = "behind"
    ROOM = "room"
    NO_SANDBOX = "no sandbox"
    QUOTA = "quota"


@dataclass(frozen=True, slots=True)
class Why:
    """Why a run waited at its last quiet visit, and what holds that answer (one object for all
    the runs that waited alike: ``Quiet.why``).

    ``limit``: the run's longest time limit (``None``: a template has none, so it never
    backfills); ``blocker``: the run it waited behind; ``gpus``/``healthy``: its least need when
    it waited for room (free GPUs, healthy ones only with ``healthy``), or what it asked when
    its workspace's quota held it, and ``starting``: it held nothing then (nor since: its
    records have not changed); ``until``: when a worker it skipped as not yet eligible becomes
    eligible; ``reason``: the no-sandbox reason, or the quota's.
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
    starting: bool = False


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

    def order(self, runs: dict[str, RunRecord], active: dict[str, None], version: int) -> list[str]:
        """The ``active`` runs by priority, then submission (and runs finished since it was
        sorted); sorted again when ``version`` (``ClusterState.order_version``) has moved."""
        if self._order_at != version or len(self._order) > 2 * len(active) + 64:
            self._order = sorted(active, key=lambda n: (-runs[n].priority, runs[n].seq))
            self._order_at = version
            if len(self.entries) > len(active):
                self.entries = {n: e for n, e in self.entries.items() if n in active}
                self._whys = {w: w for w in self.entries.values()}
            self.slots = [self.entries.get(n) for n in self._order]
        return self._order

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

    def looked(self, only: Iterable[str] | None = None) -> None:
        """The placement phase looked at every run changed since it last did (or passed it over);
        ``only``: at these (it stopped before the others: ``ticking.Admissions``)."""
        if only is None:
            self.moved.clear()
            return
        for name in only:
            self.moved.pop(name, None)
