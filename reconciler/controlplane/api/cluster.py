"""The cluster itself: ``GET /machines`` (the inventory, what is free) and ``GET /info`` (who it is).

Owns those two routes; they read the store's machines and the engine's free capacity, and
answer ``wire`` models. Must not touch: scheduling rules, SQL.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from ...wire import models as wire
from .context import Api, ApiRoute, answer
from .views import machine_views

__all__ = ["router"]

router = APIRouter(tags=["cluster"], route_class=ApiRoute)


@router.get("/machines", operation_id="list_machines", response_model=wire.MachineList)
def machines(api: Api) -> Response:
    """Every machine, its state, and the GPUs and CPU cores free on it now."""
    return answer(wire.MachineList(items=machine_views(api.engine)))


@router.get("/info", operation_id="get_info", response_model=wire.Info)
def info(api: Api) -> Response:
    """The org, workspace and cluster the path names (``/api`` alone: the default ones), and how
    this control plane runs workers."""
    org, workspace, cluster = api.scope
    return answer(
        wire.Info(
            org=org,
            workspace=workspace,
            cluster=cluster,
            executor=api.executor_name,
            schema_version=api.engine.store.schema_version(),
        )
    )
