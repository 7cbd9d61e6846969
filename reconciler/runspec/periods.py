"""Periods of GPU-hours and what figures are grouped by: the forms ``astra usage``, ``GET /usage``
and the budgets take (pure; the spec layer's, so a client checks them without the server).

Owns: ``Period`` and how one is given (``period_of``: ``--since 30d``, ``--month 2026-11``, or
the budget's ``month``/``week`` that holds ``now``: ``budget_period``), ``GROUPS`` and
``parse_group`` (``workspace``, ``label:KEY``, ``run``, ``source``), ``PeriodError`` (the words
say the form). Periods are UTC: a month from its first day's midnight, a week from Monday's.

Must not touch: anything but the standard library.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["GROUPS", "Period", "PeriodError", "budget_period", "parse_group", "period_of"]

#: What ``--by`` takes (a label's key after ``label:``).
GROUPS = ("workspace", "run", "source", "label:KEY")
#: ``--since``'s durations: a number and a unit (days, hours, minutes, weeks).
_SINCE = re.compile(r"^(\d{1,6})([dhmw])$")
_UNIT = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_MONTH = re.compile(r"^(\d{4})-(\d{2})$")


class PeriodError(ValueError):
    """A period or a grouping given in a form this module does not take: the words say the form."""


@dataclass(frozen=True, slots=True)
class Period:
    """``[start, end)`` on the control plane's clock (epoch seconds), and how it was named."""

    start: float | None
    end: float
    label: str

    def to_json(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "label": self.label}


def _month(year: int, month: int) -> tuple[float, float]:
    start = datetime(year, month, 1, tzinfo=UTC)
    days = calendar.monthrange(year, month)[1]
    return start.timestamp(), (start + timedelta(days=days)).timestamp()


def period_of(since: str | None, month: str | None, now: float) -> Period:
    """The period ``--since`` (``30d``, ``12h``, ``2w``, ``90m``) or ``--month`` (``2026-11``)
    names; neither: everything up to ``now``. Both: a ``PeriodError``."""
    if since and month:
        raise PeriodError("give --since or --month, not both")
    if since:
        found = _SINCE.match(since.strip())
        if not found:
            raise PeriodError(f"--since {since!r}: give a number and a unit, as 30d, 12h, 2w or 90m")
        return Period(now - int(found.group(1)) * _UNIT[found.group(2)], now, f"since {since}")
    if month:
        found = _MONTH.match(month.strip())
        if not found or not 1 <= int(found.group(2)) <= 12 or not 1970 <= int(found.group(1)) <= 2999:
            raise PeriodError(f"--month {month!r}: give a year and a month, as 2026-11")
        start, end = _month(int(found.group(1)), int(found.group(2)))
        return Period(start, end, month)
    return Period(None, now, "all time")


def budget_period(per: str, now: float) -> Period:
    """The calendar ``month`` or ISO ``week`` (from Monday) that holds ``now``, in UTC."""
    at = datetime.fromtimestamp(now, UTC)
    if per == "month":
        start, end = _month(at.year, at.month)
        return Period(start, end, f"{at.year:04d}-{at.month:02d}")
    if per == "week":
        monday = datetime(at.year, at.month, at.day, tzinfo=UTC) - timedelta(days=at.weekday())
        year, week, _ = monday.isocalendar()
        return Period(monday.timestamp(), (monday + timedelta(days=7)).timestamp(), f"{year}-W{week:02d}")
    raise PeriodError(f"per {per!r}: month or week")


def parse_group(by: str) -> str:
    """``by`` when it is one of ``GROUPS`` (``label:KEY`` with a key), else a ``PeriodError``."""
    if by in ("workspace", "run", "source") or (by.startswith("label:") and len(by) > len("label:")):
        return by
    raise PeriodError(f"--by {by!r}: workspace, run, source or label:KEY")
