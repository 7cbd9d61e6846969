"""The console's Usage page: GPU-hours per workspace over a month, as bars drawn in inline SVG.

Owns the route ``/o/{org}/w/{ws}/usage`` (``?month=2026-11``; left out: the month now): what
``GET /usage`` answers by workspace (``controlplane.usage.add_up`` of the store's holds), for
the workspaces the viewer's token may see (an org's token: every one of the org), each a bar of
GPU-hours with its wasted part (runs that ended Failed) drawn over it. No script, no CDN: the
chart is SVG in the page. Must not touch: how the figures are added up, access rules.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..api.context import Scoped
from ..usage import PeriodError, add_up, budget_period, period_of
from .pages import NotHere, Who, engine_call
from .render import render

__all__ = ["router"]

router = APIRouter(include_in_schema=False)
#: The chart's width for the longest bar, in SVG units.
BAR_MAX = 600


def _lines(api: Scoped, month: str | None) -> dict[str, Any]:
    now = api.clock.now()
    try:
        period = period_of(None, month, now) if month else budget_period("month", now)
    except PeriodError as exc:
        raise NotHere(str(exc)) from exc
    assert api.caller is not None
    rows = api.engine.store.hold_rows(
        api.scope.org, api.caller.workspace, api.scope.cluster, period.start, period.end
    )
    lines = add_up(rows, "workspace", period, now)
    top = max((line["gpu_hours"] for line in lines), default=0.0) or 1.0
    for line in lines:
        line["width"] = round(BAR_MAX * line["gpu_hours"] / top, 1)
        line["wasted_width"] = round(BAR_MAX * line["wasted_gpu_hours"] / top, 1)
    return {"period": period, "lines": lines, "bar_max": BAR_MAX}


@router.get("/o/{org}/w/{workspace}/usage")
async def usage_page(request: Request, _who: Who, month: str | None = None) -> Response:
    """GPU-hours per workspace this month (or ``?month=``), with the wasted part of each."""
    found = await engine_call(request, lambda api: _lines(api, month))
    return render(request, "usage.html", found)
