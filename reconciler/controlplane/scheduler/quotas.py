"""Quotas: what a workspace may hold on the cluster at once, held at every placement.

Owns: ``held_by_quota``, whether placing more GPUs for a run (and, for a run that holds nothing
yet, starting it) would take its workspace past its quota (``records.Quota``: GPUs, runs
holding machines), and the reason it then waits (``Workspace W is at its quota of N GPUs``),
or whether starting a run that holds nothing yet would spend more of a GPU-hour budget that is
spent (``ClusterState.spent``: ``Workspace W has used its N GPU-hours this month``);
and how runs of other workspaces are named in a reason (``run_named``: a run of one's own
workspace by its name, another's only by its workspace).

What a workspace holds is the state's (``ClusterState.ws_gpus``, ``ws_runs``) plus what this
tick placed (``Tick.ws_gpus``, ``Tick.ws_started``). A tick's own stops are not counted back:
their room is seen by the next tick at the same instant, so a quota is never passed, even for
a moment. The queue asks before it looks for room, and before it preempts anything: a quota
held is a wait of the run's own, so it never blocks the runs queued behind it (it is no
``Tick.blocker``), and preemption never takes GPUs from another workspace's runs to give a
workspace more than its quota.

Must not touch: the records (the queue emits the decisions), clocks, I/O.
"""

from __future__ import annotations

from reconciler.runspec.vocabulary import quota_gpus, quota_runs

from ..scopes import other_workspace, shown
from .records import RunRecord
from .ticking import Tick

__all__ = ["held_by_quota", "run_named"]


def held_by_quota(t: Tick, r: RunRecord, gpus: int) -> str | None:
    """Why ``gpus`` more GPUs for ``r`` would pass its workspace's quota (or, for a run that holds
    nothing yet, one more running run would); ``None`` when they would not."""
    s = t.s
    ws = s.ws_of[r.name]
    spent = s.spent.get(ws)  # a spent GPU-hour budget: no new run starts (running ones go on)
    quota = s.quotas.get(ws)
    if spent is None and quota is None:
        return None
    starting = s.holding(r.name) == 0 and r.name not in t.ws_started_runs
    if spent is not None and starting:
        return spent
    if quota is None:
        return None
    if quota.runs is not None and starting and s.ws_runs[ws] + t.ws_started[ws] >= quota.runs:
        return quota_runs(ws.partition("/")[2], quota.runs)
    if quota.gpus is not None and gpus and s.ws_gpus[ws] + t.ws_gpus[ws] + gpus > quota.gpus:
        return quota_gpus(ws.partition("/")[2], quota.gpus)
    return None


def run_named(key: str, seen_by: str) -> str:
    """``run NAME`` when run ``key`` is of ``seen_by``'s workspace, else ``a run of workspace W``."""
    other = other_workspace(key, seen_by)
    return f"run {shown(key)}" if other is None else f"a run of workspace {other}"
