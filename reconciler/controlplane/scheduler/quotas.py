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

__all__ = ["held_by_quota", "quota_answer", "run_named"]


def held_by_quota(t: Tick, r: RunRecord, gpus: int) -> str | None:
    """Why ``gpus`` more GPUs for ``r`` would pass its workspace's quota (or, for a run that holds
    nothing yet, one more running run would); ``None`` when they would not."""
    s = t.s
    ws = s.ws_of[r.name]
    if ws not in s.spent and ws not in s.quotas:
        return None
    starting = s.holding(r.name) == 0 and r.name not in t.ws_started_runs
    return quota_answer(t, ws, gpus, starting)


def quota_answer(t: Tick, ws: str, gpus: int, starting: bool) -> str | None:
    """``held_by_quota``'s answer for a run of workspace ``ws`` asking ``gpus`` more GPUs
    (``starting``: it holds nothing yet). It depends on nothing else of the run, and within a
    tick only on what the tick placed in ``ws``: the tick keeps it (``Tick.quota_answers``) until
    it places more there, so a queue of 10,000 runs held alike asks the quota once a tick."""
    placed = (t.ws_gpus.get(ws, 0), t.ws_started.get(ws, 0))
    key = (ws, gpus, starting)
    kept = t.quota_answers.get(key)
    if kept is not None and kept[0] == placed:
        return kept[1]
    s = t.s
    spent = s.spent.get(ws)  # a spent GPU-hour budget: no new run starts (running ones go on)
    quota = s.quotas.get(ws)
    answer = None
    if spent is not None and starting:
        answer = spent
    elif quota is None:
        answer = None
    elif quota.runs is not None and starting and s.ws_runs.get(ws, 0) + placed[1] >= quota.runs:
        answer = quota_runs(ws.partition("/")[2], quota.runs)
    elif quota.gpus is not None and gpus and s.ws_gpus.get(ws, 0) + placed[0] + gpus > quota.gpus:
        answer = quota_gpus(ws.partition("/")[2], quota.gpus)
    t.quota_answers[key] = (placed, answer)
    return answer


def run_named(key: str, seen_by: str) -> str:
    """``run NAME`` when run ``key`` is of ``seen_by``'s workspace, else ``a run of workspace W``."""
    other = other_workspace(key, seen_by)
    return f"run {shown(key)}" if other is None else f"a run of workspace {other}"
