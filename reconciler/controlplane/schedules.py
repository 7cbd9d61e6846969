"""When a schedule makes a run: the decision, pure and on whatever clock the caller reads
(the engine's, or a test's ``ManualClock``).

Kubernetes CronJob semantics: at each tick, the latest scheduled time not yet acted on makes
one run ``<name>-<YYYYMMDD-HHMM>`` (times missed while the server was down: one run, not one
each); ``concurrency`` says what happens when a run it made is still going (``Forbid``: this
time is skipped, in words; ``Allow``: made anyway; ``Replace``: the going one is stopped);
only the ``keep`` newest finished runs are kept, older ones deleted. A suspended schedule makes
nothing.

Must not touch: the store, HTTP, the scheduler's placement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from reconciler.runspec.schedules import KEEP_DEFAULT, Concurrency, last_due, scheduled_name

__all__ = ["Made", "Schedule", "Tick", "decide"]


@dataclass(frozen=True)
class Schedule:
    name: str
    cron: str
    timezone: str = "UTC"
    concurrency: Concurrency = "Forbid"
    keep: int = KEEP_DEFAULT
    suspended: bool = False


@dataclass(frozen=True)
class Made:
    """A run a schedule made: its name, when it was made, whether it has ended."""

    name: str
    created_at: float
    finished: bool


@dataclass(frozen=True)
class Tick:
    """What to do now: the run to make (``None``: none) for the time ``at``, runs to stop,
    finished runs to delete, and why a due time made no run (``Forbid``)."""

    create: str | None = None
    at: float | None = None
    stop: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()
    skipped: str | None = None
    acted: float | None = field(default=None)  # the scheduled time now acted on (made or skipped)


def decide(schedule: Schedule, last: float, now: float, made: Sequence[Made]) -> Tick:
    """The tick of ``schedule`` at ``now``; ``last``: the latest scheduled time already acted on
    (or when the schedule was made); ``made``: the runs it made that are still there."""
    going = tuple(m.name for m in made if not m.finished)
    finished = sorted((m for m in made if m.finished), key=lambda m: m.created_at, reverse=True)
    delete = tuple(m.name for m in finished[schedule.keep :])
    due = None if schedule.suspended else last_due(schedule.cron, schedule.timezone, last, now)
    if due is None:
        return Tick(delete=delete)
    if going and schedule.concurrency == "Forbid":
        words = f"{schedule.name}: the run of {_hhmm(schedule, due)} is skipped: {going[0]} is still going"
        return Tick(delete=delete, skipped=words, acted=due)
    stop = going if schedule.concurrency == "Replace" else ()
    name = scheduled_name(schedule.name, schedule.timezone, due)
    return Tick(create=name, at=due, stop=stop, delete=delete, acted=due)


def _hhmm(schedule: Schedule, when: float) -> str:
    return scheduled_name(schedule.name, schedule.timezone, when).removeprefix(f"{schedule.name}-")
