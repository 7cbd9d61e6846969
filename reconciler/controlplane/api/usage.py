"""``GET /usage``: the GPU-hours the store's holds add up to, over a period, grouped.

Owns the route: ``?by=workspace|run|source|label:KEY`` (default ``workspace``), ``?since=30d``
or ``?month=2026-11`` (neither: all time), on the path's cluster. A token of the whole org sees
every workspace of the org; a workspace's token, its workspace. The figures are
``controlplane.usage.add_up`` of the store's ``gpu_holds`` (``store.usage``): kept across
restarts, and past the audit trail's ``--audit-keep``.

Must not touch: how the figures are added up, SQL.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response

from ...wire import models as wire
from ...wire import usage as shapes
from ..usage import PeriodError, add_up, parse_group, period_of
from .context import Api, ApiError, ApiRoute, answer

__all__ = ["router"]

router = APIRouter(tags=["usage"], route_class=ApiRoute)


@router.get(
    "/usage",
    operation_id="get_usage",
    response_model=shapes.UsageReport,
    responses={422: {"model": wire.Detail, "description": "A period or a grouping this call does not take."}},
)
def get_usage(
    api: Api,
    by: Annotated[
        str,
        Query(
            description="workspace, run, source or label:KEY.", pattern=r"^(workspace|run|source|label:.+)$"
        ),
    ] = "workspace",
    since: Annotated[
        str | None,
        Query(
            description="A duration back from now: 30d, 12h, 2w, 90m (not with month).",
            pattern=r"^\d{1,6}[dhmw]$",
        ),
    ] = None,
    month: Annotated[
        str | None,
        Query(
            description="A calendar month (UTC): 2026-11 (not with since).",
            pattern=r"^(19[7-9]\d|2\d{3})-(0[1-9]|1[0-2])$",
        ),
    ] = None,
) -> Response:
    """GPU-hours held (and those of runs that ended Failed), and the runs that held GPUs, per group."""
    now = api.clock.now()
    try:
        group = parse_group(by)
        period = period_of(since, month, now)
    except PeriodError as exc:
        raise ApiError(422, wire.Detail(detail=str(exc))) from exc
    assert api.caller is not None
    org, cluster = api.scope.org, api.scope.cluster
    workspace = api.caller.workspace  # None: an org's token, which sees every workspace of it
    store = api.engine.store
    rows = store.hold_rows(org, workspace, cluster, period.start, period.end)
    sources = store.sources_of_runs(org) if group == "source" else None
    lines = add_up(rows, group, period, now, sources)
    total = {
        "workspace": "*",
        "key": "*",
        **{k: sum(line[k] for line in lines) for k in ("gpu_seconds", "wasted_gpu_seconds")},
        "runs": sum(line["runs"] for line in lines),
    }
    total["gpu_hours"] = round(total["gpu_seconds"] / 3600, 4)
    total["wasted_gpu_hours"] = round(total["wasted_gpu_seconds"] / 3600, 4)
    report = shapes.UsageReport(
        by=group,
        cluster=cluster,
        period=shapes.UsagePeriod(**period.to_json()),
        items=[shapes.UsageLine(**line) for line in lines],
        total=shapes.UsageLine(**total),
    )
    return answer(report)
