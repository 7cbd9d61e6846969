"""``ScheduleSpec``: the model of ``spec.schedule`` (a cron, its timezone, what to do when a run it
made is still going, how many finished ones are kept); its checks are ``schedules``' words.

Its own module so that ``models`` stays one concern of a readable size; ``models.Spec`` names it.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from .fields import _Strict
from .schedules import KEEP_DEFAULT as SCHEDULE_KEEP_DEFAULT
from .schedules import Concurrency as ScheduleConcurrency

__all__ = ["ScheduleSpec"]


class ScheduleSpec(_Strict):
    """When the run is made again and again: a run ``<name>-<YYYYMMDD-HHMM>`` at each time."""

    cron: str = Field(
        title="Cron",
        description='Five fields, minute hour day-of-month month day-of-week: "0 2 * * *" is 02:00 daily.',
    )
    timezone: str = Field("UTC", title="Timezone", description="An IANA timezone: Europe/Paris, UTC.")
    concurrency: ScheduleConcurrency = Field(
        "Forbid",
        title="Concurrency",
        description=(
            "When a run it made is still going at the next time. Forbid (the default): that time is "
            "skipped. Allow: both run. Replace: the going one is stopped."
        ),
    )
    keep: int = Field(
        SCHEDULE_KEEP_DEFAULT,
        title="Keep",
        description="How many finished runs it made are kept.",
        ge=0,
        le=100,
    )

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        from .schedules import cron_problem

        if problem := cron_problem(value):
            raise ValueError(problem)
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        from .schedules import timezone_problem

        if problem := timezone_problem(value):
            raise ValueError(problem)
        return value
