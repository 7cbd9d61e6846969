"""A source's suspension (``/sources/{name}/suspend``): ``GET`` it, ``PUT`` it (suspend),
``DELETE`` it (resume). Each answers the source's suspension (``wire.SourceSuspension``).

The suspension is kept in the source's status (``reconciler.state.suspension``): the watch of
the source reads it before each pass and runs none while it is held; the source's webhook
(``POST …/hook``) answers 409 and counts no call. Suspending needs no lock (a pass that holds it
ends as it would; the next is not made) and no file of the source. ``PUT`` and ``DELETE`` need
the ``write`` role (as every non-GET route), are recorded in the audit trail and queue the
alerts' ``source.suspended`` / ``source.resumed`` event.

Must not touch: the source's other state (``sources``), SQL (the ``Store``'s).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Request
from fastapi.responses import Response

from ...wire import models as wire
from ..alerts.rules import suspend_event
from .context import Api, ApiRoute, answer
from .sources import INVALID, Name

__all__ = ["router", "suspension"]

router = APIRouter(tags=["sources"], route_class=ApiRoute)


def _tell(api: Api, request: Request, name: str, held: dict | None) -> None:
    """Queue the alerts' event of a suspend or a resume (``source.suspended``, ``source.resumed``)."""
    delivery = getattr(request.app.state, "alerts", None)
    if delivery is None:
        return
    scope = (api.scope.org, api.scope.workspace, api.scope.cluster)
    if delivery.notice([suspend_event(scope, name, held, api.clock.now())]):
        wake = getattr(request.app.state, "alerts_wake", None)
        if wake is not None:
            wake()


def suspension(api: Api, name: str) -> wire.SourceSuspension:
    """The source's suspension as kept (``suspended: null`` when it is not suspended)."""
    held = api.engine.store.source_suspension(api.source_key(name))
    return wire.SourceSuspension(name=name, suspended=None if held is None else wire.Suspension(**held))


@router.get(
    "/sources/{name}/suspend", operation_id="get_source_suspension", response_model=wire.SourceSuspension
)
def get_suspension(api: Api, name: Name) -> Response:
    """Whether the source is suspended, by whom, since when and why."""
    return answer(suspension(api, name))


@router.put(
    "/sources/{name}/suspend",
    operation_id="suspend_source",
    response_model=wire.SourceSuspension,
    responses=INVALID,
)
async def suspend_source(
    api: Api, name: Name, body: Annotated[wire.SuspendBody, Body()], request: Request
) -> Response:
    """Suspend the source: its watch runs no pass (nothing applied or pruned) until it is resumed."""
    by = body.by or (api.caller.name if api.caller is not None else "?")
    held = {"by": by, "at": api.clock.now(), "reason": body.reason}
    api.engine.store.set_source_suspended(api.source_key(name), held, api.clock.now())
    api.audit("suspend", "source", name, {"reason": body.reason}, source=name)
    _tell(api, request, name, held)
    return answer(suspension(api, name))


@router.delete("/sources/{name}/suspend", operation_id="resume_source", response_model=wire.SourceSuspension)
async def resume_source(api: Api, name: Name, request: Request) -> Response:
    """Resume the source: its watch's next pass is a full one (a remote's newest commit)."""
    api.engine.store.set_source_suspended(api.source_key(name), None, api.clock.now())
    api.audit("resume", "source", name, None, source=name)
    _tell(api, request, name, None)
    return answer(suspension(api, name))
