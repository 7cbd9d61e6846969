"""The run's reason while some of its workers wait to restart after a failure.

Owns: ``restarting(s, r, n)``: ``K of N workers restarting: Worker W: <W's reason>``, naming the
worker that has spent the most restarts (the lowest rank among equals), so a crash-looping run
says at the run's level what its workers go through instead of ``Waiting in the queue``.

Must not touch: the records, the decisions (``runstates.run_state`` chooses the state), clocks, I/O.
"""

from __future__ import annotations

from reconciler.runspec.restarting import restart_of, says_restarting, workers_restarting
from reconciler.runspec.vocabulary import QUEUED, array_cap

from ..scopes import shown
from .arrays import parallel_cap
from .records import RunRecord
from .state import ClusterState

__all__ = ["restarting", "says_restarting"]


def restarting(s: ClusterState, r: RunRecord, n: int) -> str | None:
    """The reason of run ``r`` (of ``n`` workers) while its waiting workers wait to restart (or
    merely for their turn: ``Waiting in the queue``, an array's cap); ``None``: none does, or
    one says what the queue found (then the queue's reason is
    the run's: the two never take turns, and the answer does not depend on the time, which the
    ticks' memo, ``quiet``, relies on)."""
    waiting = s.pending[r.name]
    if not waiting:
        return None
    k, worst, worst_n = 0, None, -1
    workers, cap = s.workers, parallel_cap(r.run.spec)
    queued = (QUEUED, array_cap(cap)) if cap else (QUEUED,)
    for wname in waiting:
        w = workers[wname]
        again = restart_of(w.reason)
        if again is None:
            if w.reason in queued:
                continue  # a copy not yet started, or at its array's cap: the queue has no words for it
            return None
        k += 1
        if again.n > worst_n:
            worst, worst_n = w, again.n
    if worst is None:
        return None
    return workers_restarting(k, n, shown(worst.name), worst.reason)
