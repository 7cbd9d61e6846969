"""A run on a schedule (``spec.schedule``): the words of a bad cron or timezone, the names of
the runs a schedule makes, and the times it fires, read by ``croniter`` (no cron of our own).

``spec.schedule: {cron: "0 2 * * *", timezone: Europe/Paris, concurrency: Forbid, keep: 5}``
makes a run ``<name>-<YYYYMMDD-HHMM>`` (the time in the schedule's timezone) at each time.

Pure: no I/O, no clock (every time is given, in seconds since the epoch).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .errors import FieldError
from .messages import RUN_NAME_MAX
from .paths import FieldPath

__all__ = [
    "BAD_CRON",
    "BAD_TIMEZONE",
    "KEEP_DEFAULT",
    "MADE_BY",
    "NAME_MAX",
    "SOURCE_NOTES",
    "Concurrency",
    "cron_problem",
    "last_due",
    "made_document",
    "name_problem",
    "next_time",
    "schedule_errors",
    "scheduled_name",
    "timezone_problem",
    "waiting_words",
]

Concurrency = Literal["Forbid", "Allow", "Replace"]
KEEP_DEFAULT = 3  # Kubernetes CronJob's successfulJobsHistoryLimit
KEEP_MAX = 100

BAD_CRON = (
    "{cron!r} is not a cron schedule: give five fields, minute hour day-of-month month "
    'day-of-week ("0 2 * * *" is every day at 02:00)'
)
BAD_TIMEZONE = "{tz!r} is not a timezone: give an IANA name such as Europe/Paris or UTC"
#: The label of a run a schedule made: the name of the run on a schedule that made it.
MADE_BY = "astra.schedule"
#: The annotations of the source that applied a document (``apply.stamped``): the run on a
#: schedule is the source's, the runs it makes are not, so they do not carry them.
SOURCE_NOTES = frozenset({"astra.source", "astra.file", "astra.revision"})
#: The longest name of a run on a schedule: the runs it makes add ``-YYYYMMDD-HHMM``.
NAME_MAX = RUN_NAME_MAX - len("-20261202-0200")
TOO_LONG = (
    "a run on a schedule makes runs named {name}-YYYYMMDD-HHMM: its name may have at most "
    f"{NAME_MAX} characters (it has {{n}})"
)


def waiting_words(name: str, cron: str, tz: str) -> str:
    """The reason of a run on a schedule: it waits for its times, as a template (a Kubernetes
    CronJob), and holds no workers itself (the scheduler never admits it)."""
    return (
        f"Waiting for its schedule ({cron!r}, {tz}): it makes a run {name}-YYYYMMDD-HHMM at each "
        "time and holds no workers itself (astra get runs shows the next time)"
    )


def cron_problem(cron: str) -> str | None:
    """Why ``cron`` is no five-field cron schedule, or ``None``."""
    from croniter import croniter  # a spec without a schedule never pays its import

    if len(cron.split()) != 5 or not croniter.is_valid(cron):
        return BAD_CRON.format(cron=cron)
    return None


def timezone_problem(tz: str) -> str | None:
    """Why ``tz`` names no timezone, or ``None``."""
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        return BAD_TIMEZONE.format(tz=tz)
    return None


def name_problem(name: str) -> str | None:
    """Why ``name`` is too long for a run on a schedule, or ``None``."""
    return TOO_LONG.format(name=name, n=len(name)) if len(name) > NAME_MAX else None


def made_document(template: dict[str, Any], name: str, by: str) -> dict[str, Any]:
    """The document of the run ``name`` that the run on a schedule ``by`` (its document
    ``template``) makes: its metadata and spec, less the schedule and the source's annotations,
    with the label ``astra.schedule: <by>``."""
    meta = dict(template.get("metadata") or {})
    meta.pop("resource_version", None)
    meta["name"] = name
    meta["labels"] = {**(meta.get("labels") or {}), MADE_BY: by}
    notes = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in SOURCE_NOTES}
    if notes:
        meta["annotations"] = notes
    else:
        meta.pop("annotations", None)
    spec = {k: v for k, v in template["spec"].items() if k != "schedule"}
    return {"metadata": meta, "spec": spec}


def schedule_errors(schedule: dict, path: FieldPath) -> list[FieldError]:
    """A bad ``cron`` or ``timezone`` of a ``spec.schedule`` (its strings: the schema checks the
    rest), each at its field."""
    errors = []
    cron, tz = schedule.get("cron"), schedule.get("timezone")
    if isinstance(cron, str) and (problem := cron_problem(cron)):
        errors.append(FieldError.invalid(path.child("cron"), problem))
    if isinstance(tz, str) and (problem := timezone_problem(tz)):
        errors.append(FieldError.invalid(path.child("timezone"), problem))
    return errors


def next_time(cron: str, tz: str, after: float) -> float:
    """The first time strictly after ``after`` the schedule fires."""
    start = datetime.fromtimestamp(after, ZoneInfo(tz))
    from croniter import croniter

    return float(croniter(cron, start).get_next(float))


def last_due(cron: str, tz: str, after: float, now: float) -> float | None:
    """The latest time in ``(after, now]`` the schedule fires, or ``None``: however many times
    were missed (the server was down), one (Kubernetes CronJob: the most recent missed time
    starts, once)."""
    from croniter import croniter

    latest = float(croniter(cron, datetime.fromtimestamp(now + 1, ZoneInfo(tz))).get_prev(float))
    return latest if after < latest <= now else None


def scheduled_name(name: str, tz: str, when: float) -> str:
    """``<name>-<YYYYMMDD-HHMM>``, the time in the schedule's timezone."""
    return f"{name}-{datetime.fromtimestamp(when, ZoneInfo(tz)):%Y%m%d-%H%M}"
