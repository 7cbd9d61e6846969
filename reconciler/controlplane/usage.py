"""GPU-hours: what the GPUs' holds add up to, by workspace, label, run or source, over a period.

Owns: ``add_up`` (the holds' rows, as the store keeps them, to one line per group: GPU-seconds
and GPU-hours held, those of runs that ended Failed, and how many runs held GPUs in the period).
Pure: the rows and ``now`` are given; nothing here reads a clock or the store.

A hold still open counts up to ``now``; a hold that began before the period, or ends after it,
counts only its part within. The periods and the groupings (``Period``, ``period_of``,
``budget_period``, ``parse_group``) are the spec layer's (``runspec.periods``), re-exported.

Must not touch: the store, HTTP, the scheduler.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..runspec.periods import GROUPS, Period, PeriodError, budget_period, parse_group, period_of
from .scopes import shown

__all__ = ["GROUPS", "Period", "PeriodError", "add_up", "budget_period", "parse_group", "period_of"]


def held_seconds(row: Mapping[str, Any], period: Period, now: float) -> float:
    """The GPU-seconds a hold's row holds within ``period`` (an open hold: up to ``now``)."""
    end = min(row["ended_at"] if row["ended_at"] is not None else now, period.end)
    start = row["started_at"] if period.start is None else max(row["started_at"], period.start)
    return row["gpus"] * max(0.0, end - start)


def _key(row: Mapping[str, Any], by: str, source_of: Mapping[str, str]) -> tuple[str, str]:
    """(workspace, the group's value) of a hold's row."""
    ws = row["workspace"]
    if by == "workspace":
        return ws, ws
    if by == "run":
        return ws, shown(row["run"])
    if by == "source":
        return ws, source_of.get(row["run"], "-")
    return ws, str(row["labels"].get(by.partition(":")[2], "-"))


def add_up(
    rows: Iterable[Mapping[str, Any]],
    by: str,
    period: Period,
    now: float,
    source_of: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """One line per group (sorted by workspace, then the group's value): ``workspace``, ``key``
    (the group's value), ``gpu_seconds``, ``gpu_hours``, ``wasted_gpu_seconds``,
    ``wasted_gpu_hours`` (wasted: those of runs that ended Failed) and ``runs`` (the runs that held
    GPUs in the period). ``source_of``: each run key's source, for ``by="source"``."""
    sums: dict[tuple[str, str], list[float]] = {}
    runs: dict[tuple[str, str], set[str]] = {}
    for row in rows:
        seconds = held_seconds(row, period, now)
        if seconds <= 0:
            continue
        key = _key(row, by, source_of or {})
        line = sums.setdefault(key, [0.0, 0.0])
        line[0] += seconds
        if row["outcome"] == "Failed":
            line[1] += seconds
        runs.setdefault(key, set()).add(row["run"])
    return [
        {
            "workspace": ws,
            "key": key,
            "gpu_seconds": round(held, 3),
            "gpu_hours": round(held / 3600, 4),
            "wasted_gpu_seconds": round(failed, 3),
            "wasted_gpu_hours": round(failed / 3600, 4),
            "runs": len(runs[ws, key]),
        }
        for (ws, key), (held, failed) in sorted(sums.items())
    ]
