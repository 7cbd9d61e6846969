"""``GET /runs?view=brief``'s answer: what a listing of runs shows of each, without its spec.

A whole listing (``RunList``) sends each run's document and its whole status: 7 MB for 10,000
runs. A brief is what ``astra get runs`` shows of a run, in every output (its table, ``-o
wide``, ``-o json|yaml``): its name, labels and annotations, state and reason, when it was
created, its workers by state, how many run, the GPUs they hold, and its schedule. About a third
of the bytes, made without a model per run.

Owns the shapes; the values are ``controlplane.api.views.run_status``'s (``ResponseCache.briefs``
puts them together). Must not touch: how they are made.
"""

from __future__ import annotations

from pydantic import Field

from ..runspec.vocabulary import RunState
from .models import EPOCH, Answer, ScheduleStatus

__all__ = ["RunBrief", "RunBriefList"]


class RunBrief(Answer):
    """One run as a listing shows it: a ``Run``'s fields of the same names, no spec."""

    name: str
    labels: dict[str, str] = Field(description="Its metadata's labels ({} when it has none).")
    annotations: dict[str, str] = Field(description="Its metadata's annotations ({} when it has none).")
    state: RunState
    reason: str
    created_at: float | None = Field(description=EPOCH)
    workers_running: int
    gpus_held: int
    task_counts: dict[str, int] = Field(
        description="Workers by state (an array not admitted yet: its size, Pending)."
    )
    schedule: ScheduleStatus | None = Field(description="Its schedule; null: it has none.")


class RunBriefList(Answer):
    """``GET /runs?view=brief``: every run's brief, in submission order."""

    items: list[RunBrief]
