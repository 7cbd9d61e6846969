"""The cluster itself: ``GET /machines`` (the inventory, what is free) and ``GET /info`` (who it is).

Owns those two routes; they read the store's machines and the engine's free capacity, and
answer ``wire`` models. Must not touch: scheduling rules, SQL.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from ...wire import models as wire
from .context import Api, ApiRoute, answer

__all__ = ["router"]

router = APIRouter(tags=["cluster"], route_class=ApiRoute)


@router.get("/machines", operation_id="list_machines", response_model=wire.MachineList)
def machines(api: Api) -> Response:
    """Every machine, its state, and the GPUs and CPU cores free on it now."""
    s = api.engine.state
    items = []
    for m in api.engine.store.machine_rows(api.engine.cluster):
        free = s.free.get(m["name"], [0, 0, 0, 0])
        state = "Down" if m["name"] in s.down else m["state"]
        items.append(
            wire.Machine.model_validate(
                {**m, "state": state, "free_gpus": free[0] + free[1], "free_cpu_cores": free[2]}
            )
        )
    return answer(wire.MachineList(items=items))


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
