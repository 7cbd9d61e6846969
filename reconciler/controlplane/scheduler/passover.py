"""Passing over quiet runs: whether a waiting run's last answer still holds at this tick.

Owns ``holds``, the rule the placement phase (``queue.placement``) asks of each run the memo
kept (``quiet.Quiet``) before it visits the run. A run is passed over (in well under a
microsecond) when its own records have not changed since its last visit, nothing in this tick
touched it, and what this tick sees of the rest still gives the answer that visit gave, by the
reason it waited (``quiet.Why``):

==========  ===============================================================================
behind B    the run blocked for room is B again, and this run still may not backfill
            (``priorities.may_backfill``: its longest time limit against this tick's shadow)
room        fewer GPUs are free now, over the usable machines, than its least need (the first
            check of every search for room, ``placement.Memo``, and of each machine's fit); no
            worker of it became eligible since (``until``); no quota (nor spent budget) holds its workspace;
            nothing of lower priority holds a machine (no preemption); and either no run is
            blocked yet (this one is, again: ``Tick.blocker``) or it may backfill
no sandbox  the same ``ClusterState.no_sandbox``
quota       its workspace's quota (or spent budget) holds it again, asked with what it asked
            then (``quotas.quota_answer``: the same words); it is not behind a blocked run
            it may not backfill; no worker of it became eligible since; no sandbox is missing
            (a run that depends on runs is not kept: ``queue``)
==========  ===============================================================================

Every other run is visited as before, and a run passed over emits nothing and leaves the tick as
a visit would (the blocked run set, the shadow estimated at the same run). A reason found to
hold is not checked again for the runs alike that follow, until a run is visited (the queue's).

What a tick cannot pass over, though: when the run blocked for room changes, every run waiting
behind it gets the new reason (it names that run), one decision each.

Must not touch: the records, the memo (the queue writes what a visit found: ``Quiet.learn``),
clocks (``now`` is the tick's), I/O.
"""

from __future__ import annotations

from .priorities import shadow
from .quiet import Wait, Why
from .quotas import quota_answer
from .ticking import Tick

__all__ = ["holds"]


def holds(t: Tick, why: Why, name: str) -> bool:
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
    may = b is not None and limit is not None and t.now + limit <= shadow(t)
    if wait is Wait.BEHIND:
        return b is not None and not may and b.name == why.blocker
    if wait is Wait.QUOTA:
        if (b is not None and not may) or t.now >= why.until or s.no_sandbox is not None:
            return False
        return quota_answer(t, why.workspace, why.gpus, why.starting) == why.reason
    if (b is not None and not may) or t.now >= why.until or why.priority > t.lowest:
        return False
    if why.workspace in s.quotas or why.workspace in s.spent or t.view.free_gpus(why.healthy) >= why.gpus:
        return False
    if b is None:
        t.blocker = s.runs[name]
    return True
