"""The schedules' table (``schedules``): one row per run on a schedule. Built by revision
``0009_schedules``.

Must not touch: connections, transactions (``schedules``).
"""

from __future__ import annotations

from sqlmodel import Field

from .tables import StoreTable, table_of

__all__ = ["SCHEDULES", "ScheduleRow"]


class ScheduleRow(StoreTable, table=True):
    """A run on a schedule (its key), as Kubernetes keeps a CronJob's status: the latest scheduled
    time acted on (a run made, or the time skipped; at first, when the run was made),
    ``lastScheduleTime`` (the time of the last run it made), ``lastSuccessfulTime`` (when a run it
    made last completed), and its suspension. ``run_created_at``: when the run on a schedule was
    made, which tells a row of a run deleted and made again under its name."""

    __tablename__ = "schedules"
    run: str = Field(primary_key=True)
    run_created_at: float
    acted_at: float
    last_schedule_at: float | None = None
    last_successful_at: float | None = None
    suspended: bool
    suspended_at: float | None = None
    suspended_by: str | None = None


SCHEDULES = table_of(ScheduleRow)
