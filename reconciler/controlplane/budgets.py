"""GPU-hour budgets: how much of each workspace's budget its holds have spent this period.

Owns ``Budget`` (GPU-hours per calendar ``month`` or ISO ``week``, UTC) and ``BudgetBook``, the
engine's view of every budget on its cluster: the GPU-seconds its workspace's closed holds spent
in the current period (read from the store when the book is made, when a budget is set and when a
period turns, then added to as holds close: ``HoldBook.drain``), and the open holds' share, up
to now. ``spent(now, holds)`` gives the scheduler the workspaces whose budget is spent, with the
words their new runs wait with (``ClusterState.spent``: running runs go on); ``next_change``
when that may change by itself (the budget reached by what runs, or a new period).

Must not touch: the scheduler's rules (it is handed the words), SQL (the store's), clocks.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reconciler.runspec.vocabulary import budget_spent

from .usage import Period, budget_period, held_seconds

if TYPE_CHECKING:
    from .holds import HoldBook
    from .store import Store

__all__ = ["Budget", "BudgetBook"]

#: What ``per`` takes.
PERIODS = ("month", "week")


@dataclass(frozen=True, slots=True)
class Budget:
    gpu_hours: int
    per: str


class BudgetBook:
    """Every GPU-hour budget of one cluster, and what each has spent this period."""

    def __init__(self, store: Store, cluster: str, now: float) -> None:
        self.store, self.cluster = store, cluster
        self.budgets: dict[str, Budget] = {}
        self.periods: dict[str, Period] = {}
        self.closed: dict[str, float] = {}
        self.used: dict[str, float] = {}
        self._next: float | None = None
        for row in store.budget_rows(cluster):
            self._load(f"{row['org']}/{row['workspace']}", Budget(row["gpu_hours"], row["per"]), now)

    def _load(self, ws: str, budget: Budget, now: float) -> None:
        """Read what ``ws``'s closed holds spent in the period that holds ``now``."""
        period = budget_period(budget.per, now)
        org, _, name = ws.partition("/")
        rows = self.store.hold_rows(org, name, self.cluster, period.start, now)
        self.budgets[ws], self.periods[ws] = budget, period
        self.closed[ws] = sum(held_seconds(r, period, now) for r in rows if r["ended_at"] is not None)

    def set(self, ws: str, budget: Budget | None, now: float) -> None:
        """Set (``None``: lift) ``ws``'s budget (``ORG/WORKSPACE``); the next step holds it."""
        if budget is None:
            for d in (self.budgets, self.periods, self.closed, self.used):
                d.pop(ws, None)
        else:
            self._load(ws, budget, now)

    def spent(self, now: float, holds: HoldBook) -> dict[str, str]:
        """The workspaces whose budget is spent at ``now``, each with the words its new runs wait
        with; and, kept for ``next_change``, when that may change."""
        ended = holds.drain()
        if not self.budgets:
            self._next = None
            return {}
        for ws, budget in list(self.budgets.items()):
            if now >= self.periods[ws].end:
                self._load(ws, budget, now)
        for ws, gpus, began, until in ended:
            p = self.periods.get(ws)
            if p is not None and p.start is not None:
                self.closed[ws] += gpus * max(0.0, min(until, p.end) - max(began, p.start))
        live: dict[str, float] = {}
        rate: Counter[str] = Counter()
        for began, gpus, ws in holds.open.values():
            p = self.periods.get(ws)
            if p is not None and p.start is not None:
                live[ws] = live.get(ws, 0.0) + gpus * max(0.0, now - max(began, p.start))
                rate[ws] += gpus
        out: dict[str, str] = {}
        wakes = []
        for ws, budget in self.budgets.items():
            used = self.used[ws] = self.closed[ws] + live.get(ws, 0.0)
            limit = budget.gpu_hours * 3600
            if used >= limit:
                out[ws] = budget_spent(ws.partition("/")[2], budget.gpu_hours, budget.per)
                wakes.append(self.periods[ws].end)
            elif rate[ws]:
                wakes.append(now + (limit - used) / rate[ws])
        self._next = min(wakes) if wakes else None
        return out

    def next_change(self) -> float | None:
        """When a budget may be reached by what runs now, or a spent one's period turns."""
        return self._next
