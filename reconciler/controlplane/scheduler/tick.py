"""The tick: one pass of pure decisions over the state at ``now``, in a fixed order of phases.

Owns: ``plan_tick`` (the phases, in order: cancellations, settling ended workers, time limits,
Stale workers counted as lost, gang barriers, starts, run states, placement) and ``schedule``
(one tick over plain records, as a store loads them). The working state the phases share is
``ticking.Tick``; each phase is its module's (``runstates``, ``restarts``, ``gangs``,
``queue``). Nothing below imports this module: it is the top of the scheduler but for
``outlook``, which ticks a copy of the state.

Must not touch: the records (``plan_tick`` only reads ``state``; ``ClusterState.apply`` carries
the decisions out), clocks (``now`` is an argument), I/O, randomness.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..inventory import Inventory
from .gangs import barriers, starts
from .queue import placement
from .records import Decision, RunRecord, WorkerRecord
from .restarts import settle, stale_workers, time_limits
from .runstates import cancellations, run_states
from .state import ClusterState
from .ticking import Admissions, Tick

__all__ = ["plan_tick", "schedule"]


def plan_tick(
    state: ClusterState, now: float, *, quiet: bool = True, admissions: Admissions | None = None
) -> list[Decision]:
    """This tick's decisions; pure: reads ``state`` and ``now`` only (and counts down
    ``admissions``, the workers its admissions may still make: ``ticking.Admissions``).

    ``quiet``: with the memo the state keeps across ticks (``quiet.Quiet``), which passes over
    the waiting runs whose answer cannot have changed; without it, every run is visited. The
    decisions are the same either way."""
    t = Tick(state, now, quiet, admissions)
    cancellations(t)
    settle(t)
    time_limits(t)
    stale_workers(t)
    barriers(t)
    starts(t)
    run_states(t)
    placement(t)
    return t.out


def schedule(
    inventory: Inventory, runs: Iterable[RunRecord], workers: Iterable[WorkerRecord], now: float
) -> list[Decision]:
    """One tick over plain records (what a store loads): the indexes are built, then ``plan_tick``."""
    state = ClusterState(
        inventory,
        {r.name: r for r in runs},
        {w.name: w for w in workers},
    )
    return plan_tick(state, now)
