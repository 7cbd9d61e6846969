"""Runs waiting on their workspace's quota, followed from the events the scheduler records: which
wait has lasted longer than an alert's ``waited``, told once per run per wait. Pure.

The scheduler's words for a quota wait are the queue's reason for a run its workspace's quota
holds (``runspec.messages.QUOTA_GPUS_REASON``, ``QUOTA_RUNS_REASON``: ``Workspace W is at its
quota of N GPUs`` / ``… N running runs``), set on the run by a ``MarkRun`` while it is Pending.
A **wait** starts at the first run event (``events`` table, ``worker`` empty) that says the run
is Pending with one of them, and ends at the next run event that says anything else (another
reason, Running, a final state). The quota's words changing (8 GPUs, then 2 running runs) is the
same wait. A run already holding workers whose next worker waits on the quota is not Pending,
and not a quota wait of the run (its workers say so).

A wait is named by its first event's id (``Wait.key``), so it is one message per alert: the
outbox keeps a (alert, key) once, across a restart too (``QuotaWaits.told`` only spares the
store a refused insert each step). After a restart the waits are rebuilt from the events of the
runs the store says are waiting on a quota (``rebuild``).

Must not touch: the store, the clock (``now`` is given), the scheduler.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.runspec import messages as msg

__all__ = ["QUOTA_LIKE", "QuotaWaits", "Wait", "is_quota_reason", "rebuild"]


def _pattern(template: str) -> str:
    return "^" + re.escape(template).replace(r"\{workspace\}", ".+").replace(r"\{n\}", r"\d+") + "$"


_QUOTA = re.compile("|".join(_pattern(t) for t in (msg.QUOTA_GPUS_REASON, msg.QUOTA_RUNS_REASON)))
#: The quota reasons as SQL ``LIKE`` patterns (the store finds the runs waiting on one).
QUOTA_LIKE = tuple(
    t.replace("{workspace}", "%").replace("{n}", "%") for t in (msg.QUOTA_GPUS_REASON, msg.QUOTA_RUNS_REASON)
)


def is_quota_reason(reason: str | None) -> bool:
    """Whether ``reason`` is the queue's words for a run its workspace's quota holds."""
    return bool(reason) and _QUOTA.match(reason or "") is not None


@dataclass(frozen=True)
class Wait:
    """One run's quota wait: its run (the store's key), since when, and its first event's id."""

    run: str
    since: float
    first: int
    reason: str

    @property
    def key(self) -> str:
        return f"{self.run}/{self.first}"


@dataclass
class QuotaWaits:
    """The open waits, by run; ``told``: the (wait, seconds) already queued."""

    open: dict[str, Wait] = field(default_factory=dict)
    told: set[tuple[str, int]] = field(default_factory=set)

    def see(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Follow the events ``rows`` (oldest first): a wait opens, goes on, or ends."""
        for row in rows:
            if row.get("worker") is not None or not row.get("state"):
                continue
            run, reason = str(row["run"]), row.get("reason")
            if row["state"] == "Pending" and is_quota_reason(reason):
                held = self.open.get(run)
                since = (held.since, held.first) if held is not None else (float(row["at"]), int(row["id"]))
                self.open[run] = Wait(run, since[0], since[1], str(reason))
            else:
                self.open.pop(run, None)

    def due(self, now: float, thresholds: Iterable[int]) -> list[tuple[Wait, int]]:
        """The (wait, seconds) that have lasted ``seconds`` and were not told yet."""
        limits = sorted(set(thresholds))
        return [
            (w, t)
            for w in self.open.values()
            for t in limits
            if now - w.since >= t and (w.key, t) not in self.told
        ]

    def drop(self, run: str) -> None:
        """Forget ``run``'s wait (the store says it waits no more: deleted, or moved on)."""
        self.open.pop(run, None)


def rebuild(events_of_runs: Iterable[Iterable[Mapping[str, Any]]]) -> QuotaWaits:
    """The waits of the runs whose events are given (each run's, oldest first)."""
    waits = QuotaWaits()
    for rows in events_of_runs:
        waits.see(rows)
    return waits
