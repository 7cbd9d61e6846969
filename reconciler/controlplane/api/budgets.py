"""``/workspaces/{name}/budget``: a workspace's GPU-hour budget on the path's cluster.

Owns the routes: ``PUT`` (the org's admin, as a quota: ``{"gpu_hours": 5000, "per": "month"}``,
``gpu_hours`` null lifts it), ``GET`` (read, within the token's scope): the budget, its period
now, and what the workspace's holds spent of it (``controlplane.budgets.BudgetBook``). Once spent,
the workspace's new runs wait (``Workspace W has used its N GPU-hours this month``); its running
runs go on; the next period lets them start. Every write lands in the audit trail.

Must not touch: SQL (the store's), the scheduler (the engine's book holds the budget).
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from ...wire import models as wire
from ...wire import usage as shapes
from ..budgets import Budget
from .context import AdminRoute, Api, ApiRoute, answer, require_org_admin
from .teams import BAD_NAME, WorkspaceName, _covered, _made

__all__ = ["admin", "router"]

router = APIRouter(tags=["teams"], route_class=ApiRoute)
admin = APIRouter(tags=["teams"], route_class=AdminRoute)


def _view(api: Api, name: str) -> shapes.Budget:
    key = f"{api.scope.org}/{name}"
    book = api.engine.budgets
    budget, period = book.budgets.get(key), book.periods.get(key)
    if budget is None or period is None:
        return shapes.Budget(
            workspace=name, cluster=api.scope.cluster, gpu_hours=None, per=None, period=None,
            used_gpu_hours=0.0, left_gpu_hours=None,
        )  # fmt: skip
    used = book.used.get(key, book.closed.get(key, 0.0)) / 3600
    return shapes.Budget(
        workspace=name,
        cluster=api.scope.cluster,
        gpu_hours=budget.gpu_hours,
        per=budget.per,
        period=shapes.UsagePeriod(**period.to_json()),
        used_gpu_hours=round(used, 4),
        left_gpu_hours=round(max(0.0, budget.gpu_hours - used), 4),
    )


@router.get("/workspaces/{name}/budget", operation_id="get_workspace_budget", response_model=shapes.Budget,
            responses={404: {"model": wire.Detail}, **BAD_NAME})  # fmt: skip
def get_budget(api: Api, name: WorkspaceName) -> Response:
    """A workspace's GPU-hour budget on this cluster, and what it spent this period."""
    _covered(api, name)
    return answer(_view(api, name))


@admin.put(
    "/workspaces/{name}/budget",
    operation_id="set_workspace_budget",
    response_model=shapes.Budget,
    responses={422: {"model": wire.Problems | wire.Detail, "description": "A bad name or budget."}},
)
async def set_budget(api: Api, name: WorkspaceName, body: shapes.BudgetWrite) -> Response:
    """Set (or, ``gpu_hours`` null, lift) a workspace's GPU-hour budget per month or week: once
    spent, its new runs wait until the next period; its running runs go on."""
    require_org_admin(api, "setting a budget")
    _made(api, name)
    org, cluster, now = api.scope.org, api.scope.cluster, api.clock.now()
    kept = None if body.gpu_hours is None else (body.gpu_hours, body.per)
    api.engine.store.put_budget(org, name, cluster, kept, now)
    api.engine.budgets.set(f"{org}/{name}", None if kept is None else Budget(*kept), now)
    api.on_change()
    api.audit(
        "set",
        "budget",
        name,
        {"cluster": cluster, "gpu_hours": body.gpu_hours, "per": body.per},
        workspace=name,
    )
    return answer(_view(api, name))
