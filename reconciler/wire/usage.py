"""``GET /usage``'s answer: GPU-hours held by workspace, label, run or source, over a period.

Owns the shapes; the figures are ``controlplane.usage``'s. Must not touch: how they are added up.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field

from .models import EPOCH, Answer, RequestBody, _integral

#: A budget's GPU-hours: an integer (``3.0`` is one, as JSON Schema has it), its bounds before the
#: validator so the schema carries them (as ``teams.QuotaCount``).
BudgetHours = Annotated[int, Field(ge=0, le=1_000_000_000), BeforeValidator(_integral)]

__all__ = ["Budget", "BudgetWrite", "UsageLine", "UsagePeriod", "UsageReport"]


class UsagePeriod(Answer):
    start: float | None = Field(description=f"{EPOCH} null: from the first hold.")
    end: float = Field(description=EPOCH)
    label: str = Field(description="'2026-11', 'since 30d', 'all time'.")


class UsageLine(Answer):
    workspace: str
    key: str = Field(
        description="The group's value: the workspace, the run, the source, the label's value ('-': none)."
    )
    gpu_seconds: float = Field(description="GPUs held × seconds, within the period.")
    gpu_hours: float
    wasted_gpu_seconds: float = Field(description="Those of runs that ended Failed.")
    wasted_gpu_hours: float
    runs: int = Field(description="Runs that held GPUs in the period.")


class UsageReport(Answer):
    by: str = Field(description="workspace, run, source or label:KEY.")
    cluster: str
    period: UsagePeriod
    items: list[UsageLine]
    total: UsageLine = Field(description="Every line added up (key '*').")


class BudgetWrite(RequestBody):
    """A workspace's GPU-hour budget on this cluster (``gpu_hours`` null: lifted)."""

    gpu_hours: BudgetHours | None = Field(None, description="GPU-hours per period.")
    per: Literal["month", "week"] = Field("month", description="A calendar month or an ISO week (UTC).")


class Budget(Answer):
    """A workspace's GPU-hour budget on this cluster, and what its holds spent of it this period."""

    workspace: str
    cluster: str
    gpu_hours: int | None = Field(description="null: no budget.")
    per: str | None
    period: UsagePeriod | None = Field(description="The period now (null: no budget).")
    used_gpu_hours: float = Field(description="Spent this period, the holds still open up to now.")
    left_gpu_hours: float | None = Field(description="What is left (0 once spent); null: no budget.")
