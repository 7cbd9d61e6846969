"""A run's schedule (``/runs/{name}/schedule``, = ``/jobs/…``): ``GET`` it; its suspension
(``/runs/{name}/schedule/suspend``): ``PUT`` it (suspend), ``DELETE`` it (resume), as a
source's (``api.suspend``). Each answers the schedule (``wire.ScheduleStatus``).

A suspended schedule makes no run; resumed, a time missed while it was suspended starts once (the
latest), as a Kubernetes CronJob without ``startingDeadlineSeconds`` (``schedule_book``). The
suspension is the server's, not the file's (``astra source suspend``'s way): a GitOps pass does
not undo it, and a replace of the run keeps it. ``PUT`` and ``DELETE`` need the ``write`` role (as
every non-GET route) and are recorded in the audit trail. 409 for a run that has no schedule.

Must not touch: when a schedule fires (``schedules``), SQL (the ``Store``'s).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body
from fastapi.responses import Response

from ...wire import models as wire
from .context import Api, ApiError, ApiRoute, answer
from .runs import RunName, the_run, under_both
from .sources import INVALID

__all__ = ["router"]

router = APIRouter(tags=["runs"], route_class=ApiRoute)


def _scheduled(api: Api, name: str) -> str:
    """The key of the scope's run ``name``; 404 for none, 409 for one that has no schedule."""
    key = the_run(api, name)
    if api.engine.schedules.status(key) is None:
        raise ApiError(
            409, wire.Detail(detail=f"run {name} has no schedule: give it spec.schedule to make it one")
        )
    return key


def _said(api: Api, key: str) -> Response:
    found = api.engine.schedules.status(key)
    assert found is not None
    return answer(wire.ScheduleStatus(**found))


def get_schedule(api: Api, name: RunName) -> Response:
    """The run's schedule: its cron, when it next makes a run, whether it is suspended."""
    return _said(api, _scheduled(api, name))


def suspend_schedule(
    api: Api, name: RunName, body: Annotated[wire.SuspendBody | None, Body()] = None
) -> Response:
    """Suspend the run's schedule: it makes no run until it is resumed (the runs it made go on).
    The body (optional) says who (``by``; the token's name if empty) and why (``reason``)."""
    key = _scheduled(api, name)
    body = body or wire.SuspendBody(by="", reason="")
    by = body.by or (api.caller.name if api.caller is not None else "?")
    api.engine.schedules.suspend(key, by, api.clock.now(), body.reason)
    api.audit("suspend", "schedule", name, {"reason": body.reason} if body.reason else None)
    api.on_change()
    return _said(api, key)


def resume_schedule(api: Api, name: RunName) -> Response:
    """Resume the run's schedule: a time missed while it was suspended starts once, at once."""
    key = _scheduled(api, name)
    api.engine.schedules.suspend(key, None, api.clock.now())
    api.audit("resume", "schedule", name)
    api.on_change()  # the loop steps now: a missed time is made at once
    return _said(api, key)


_ERRORS: dict[int | str, dict] = {404: {"model": wire.Detail}, 409: {"model": wire.Detail}}

under_both(
    router,
    "/{name}/schedule",
    get_schedule,
    method="GET",
    operation="get_{word}_schedule",
    response_model=wire.ScheduleStatus,
    responses=_ERRORS,
)
under_both(
    router,
    "/{name}/schedule/suspend",
    suspend_schedule,
    method="PUT",
    operation="suspend_{word}_schedule",
    response_model=wire.ScheduleStatus,
    responses={**_ERRORS, **INVALID},
)
under_both(
    router,
    "/{name}/schedule/suspend",
    resume_schedule,
    method="DELETE",
    operation="resume_{word}_schedule",
    response_model=wire.ScheduleStatus,
    responses=_ERRORS,
)
