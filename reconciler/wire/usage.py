"""``GET /usage``'s answer: GPU-hours held by workspace, label, run or source, over a period.

Owns the shapes; the figures are ``controlplane.usage``'s. Must not touch: how they are added up.
"""

from __future__ import annotations

from pydantic import Field

from .models import EPOCH, Answer

__all__ = ["UsageLine", "UsagePeriod", "UsageReport"]


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
