"""How a run on a schedule reads: ``astra get runs``' ``SCHEDULE NEXT`` and ``astra describe
run``'s lines (``astra schedule`` suspends and resumes). Plain text, no typer: the reads' plain
argv route prints them. Must not touch: the cluster (it is given the run).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..runs import LiveRun

__all__ = ["SCHEDULE_COLUMNS", "at", "schedule_cells", "schedule_lines"]

#: The columns ``astra get runs`` adds when a run it lists is on a schedule.
SCHEDULE_COLUMNS = ("SCHEDULE", "NEXT")


def at(when: float | None) -> str:
    """A time as the schedule's lines say it (UTC, to the minute); ``-`` for none."""
    if when is None:
        return "-"
    return dt.datetime.fromtimestamp(when, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _in(when: float, now: float) -> str:
    from .runviews import age

    return "now" if when <= now else f"in {age(now, when)}"


def schedule_cells(s: dict | None, now: float) -> tuple[str, str]:
    """``SCHEDULE NEXT`` of ``astra get runs`` of a run's schedule ``s``: ``0 2 * * *
    Europe/Paris``, ``in 9h`` (``-`` for a run with no schedule; ``suspended``)."""
    if not s:
        return ("-", "-")
    nxt = s.get("next_at")
    shown = "suspended" if s.get("suspended") else "-" if nxt is None else _in(nxt, now)
    return (f"{s.get('cron')} {s.get('timezone')}", shown)


def schedule_lines(run: LiveRun, now: float) -> list[str]:
    """What ``astra describe run`` says of a run on a schedule (a run it made says so in its
    ``Source:`` line)."""
    s = run.schedule
    if not s:
        return []
    nxt = s.get("next_at")
    if s.get("suspended"):
        when = f"suspended by {s.get('suspended_by') or '?'} at {at(s.get('suspended_at'))}"
    else:
        when = "-" if nxt is None else f"{at(nxt)} ({_in(nxt, now)})"
    active = ", ".join(s.get("active") or []) or "-"
    return [
        f"Schedule:  {s.get('cron')} ({s.get('timezone')}), concurrency {s.get('concurrency')}, "
        f"keeps {s.get('keep')} finished",
        f"Next run:  {when}",
        f"Last made: {at(s.get('last_schedule_at'))}; last completed: {at(s.get('last_successful_at'))}",
        f"Active:    {active}",
    ]
