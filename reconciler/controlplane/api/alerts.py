"""Alerts (``/alerts``): a workspace's rules, a test message, what they sent; and the events of
the sources' status writes (``notice_status``, called by ``sources``).

The rules are the workspace's (``ORG/WORKSPACE``, whatever the cluster). Reads need ``read``,
writes ``write`` (as every route); each write is in the audit trail. Nothing here sends: a
message is queued in the store (``Delivery.notice``) and the server's delivery task sends it,
so no request waits on a sink. The server's ``Delivery`` is ``app.state.alerts`` (none: nothing
is queued, as in a test that did not set one).

Must not touch: how a message is sent (``alerts.sinks``), SQL (the ``Store``'s).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from ...wire import models as wire
from ...wire.alerts import (
    AlertHistory,
    AlertList,
    AlertMessage,
    AlertRule,
    AlertWrite,
    PlanStatus,
    PlanStatusQueued,
)
from ..alerts.rules import Alert, Event, matches, plan_event, replace_events, source_event
from ..store import NotFound
from .context import Api, ApiError, ApiRoute, answer

__all__ = ["notice_status", "router"]

router = APIRouter(tags=["alerts"], route_class=ApiRoute)

AlertName = Annotated[
    str, Path(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", description="The alert's name.")
]


def _delivery(request: Request) -> Any:
    return getattr(request.app.state, "alerts", None)


def source_link(request: Request, api: Api, name: str) -> str:
    """The source's console page (``/o/ORG/w/WS/sources/NAME``): a commit status's link."""
    org, workspace, _ = api.scope
    return str(request.base_url).rstrip("/") + f"/o/{org}/w/{workspace}/sources/{quote(name, safe='/')}"


def notice_status(
    request: Request, api: Api, name: str, before: dict[str, Any], after: dict[str, Any]
) -> None:
    """Queue the events of a source's status write, if there are some to tell
    (``rules.source_event``; the held replaces it lists or says carried out, ``replace_events``,
    with their runs' labels)."""
    delivery = _delivery(request)
    if delivery is None:
        return
    scope, now = (api.scope.org, api.scope.workspace, api.scope.cluster), api.clock.now()
    link = source_link(request, api, name)
    event = source_event(scope, name, before, after, now, link)
    events = [event] if event is not None else []
    for held in replace_events(scope, name, before, after, now, link):
        events.append(replace(held, labels=_labels(api, str(held.run))))
    if events and delivery.notice(events):
        wake = getattr(request.app.state, "alerts_wake", None)
        if wake is not None:
            wake()


def _labels(api: Api, run: str) -> dict[str, str]:
    """A run's labels (``{}`` when it is not in the store: a run alerts select by label)."""
    row = api.engine.store.run_row(api.key(run))
    if row is None:
        return {}
    return dict(json.loads(row["document"]).get("metadata", {}).get("labels") or {})


@router.get("/alerts", operation_id="list_alerts", response_model=AlertList)
def list_alerts(api: Api) -> Response:
    """The workspace's alerts, by name."""
    rules = api.engine.store.alert_rules(api.scope.workspace_key)
    return answer(AlertList(items=[_rule(Alert.from_json(r)) for r in rules]))


def _rule(alert: Alert) -> AlertRule:
    """An alert as answered: every field, ``declared_by`` ``null`` when made by hand (its stored
    record leaves it out, as records made before it had one)."""
    return AlertRule(**{**alert.to_json(), "declared_by": alert.declared_by})


@router.put(
    "/alerts/{name}",
    operation_id="put_alert",
    response_model=AlertRule,
    responses={201: {"model": AlertRule}, 422: {"model": wire.Problems | wire.Detail}},
)
async def put_alert(api: Api, name: AlertName, body: AlertWrite) -> Response:
    """Create (201) or replace (200) an alert. Its sink names secrets, never holds them."""
    sink = body.sink.model_dump(exclude_none=True, by_alias=True)
    alert = Alert(
        name,
        api.scope.workspace_key,
        sink,
        events=tuple(body.events),
        sources=tuple(body.sources),
        labels=body.labels,
        severity=body.severity,
        restarts=body.restarts,
        waited=body.waited,
        declared_by=body.declared_by,
    )
    new = api.engine.store.put_alert(api.scope.workspace_key, name, alert.to_json(), api.clock.now())
    api.audit("create" if new else "update", "alert", name, {"sink": sink["kind"]})
    return answer(_rule(alert), 201 if new else 200)


@router.delete(
    "/alerts/{name}",
    operation_id="delete_alert",
    status_code=204,
    response_class=Response,
    responses={404: {"model": wire.Detail}, 422: {"model": wire.Detail}},
)
async def delete_alert(api: Api, name: AlertName) -> Response:
    """Forget an alert (what it sent stays in the history)."""
    try:
        api.engine.store.delete_alert(api.scope.workspace_key, name)
    except NotFound as exc:
        raise ApiError(404, wire.Detail(detail=str(exc))) from exc
    api.audit("delete", "alert", name, None)
    return Response(status_code=204)


@router.post(
    "/alerts/{name}/test",
    operation_id="test_alert",
    status_code=202,
    response_model=AlertMessage,
    responses={404: {"model": wire.Detail}, 422: {"model": wire.Detail}},
    openapi_extra={"requestBody": {"content": {"application/json": {"schema": {}}}, "required": False}},
)
async def test_alert(api: Api, name: AlertName, request: Request) -> Response:
    """Queue a test message through the alert's sink (its answer is in the history)."""
    store, ws, now = api.engine.store, api.scope.workspace_key, api.clock.now()
    if not any(r["name"] == name for r in store.alert_rules(ws)):
        raise ApiError(404, wire.Detail(detail=f"no alert named {name}"))
    event = Event(
        "alert.test",
        f"test/{name}/{now}",
        ws,
        f"a test of alert {name}",
        now,
        alert=name,
        cluster=api.scope.cluster,
    )
    store.enqueue([(ws, name, event.key, event.to_json())], now)
    wake = getattr(request.app.state, "alerts_wake", None)
    if wake is not None:
        wake()
    (queued,) = [m for m in store.alert_history(ws, name, limit=1)]
    return answer(_message(queued), 202)


def _message(row: dict[str, Any]) -> AlertMessage:
    return AlertMessage(**{k: row[k] for k in AlertMessage.model_fields})


@router.get(
    "/alerts:history",
    operation_id="alert_history",
    response_model=AlertHistory,
    responses={422: {"model": wire.Detail, "description": "A limit out of 1..1000."}},
)
def alert_history(
    api: Api,
    alert: Annotated[str | None, Query(description="Only this alert's messages.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Response:
    """What the workspace's alerts sent (or are sending, or gave up on), newest first."""
    rows = api.engine.store.alert_history(api.scope.workspace_key, alert, limit)
    return answer(AlertHistory(items=[_message(r) for r in rows]))


@router.post(
    "/alerts:status",
    operation_id="post_plan_status",
    status_code=202,
    response_model=PlanStatusQueued,
    responses={422: {"model": wire.Problems | wire.Detail}},
)
async def post_plan_status(api: Api, body: PlanStatus, request: Request) -> Response:
    """Queue a plan's verdict (``astra plan --status-context``) for the workspace's commit-status
    alerts that select its source; which alerts will post it (the tokens stay in the server)."""
    store, ws, now = api.engine.store, api.scope.workspace_key, api.clock.now()
    scope = (api.scope.org, api.scope.workspace, api.scope.cluster)
    event = plan_event(scope, body.source, body.revision, (body.state, body.description, body.context), now)
    event = replace(event, link=source_link(request, api, body.source))
    rules = [Alert.from_json(r) for r in store.alert_rules(ws)]
    chosen = [a for a in rules if matches(a, event)]
    if chosen:
        store.enqueue([(ws, a.name, event.key, event.to_json()) for a in chosen], now)
        wake = getattr(request.app.state, "alerts_wake", None)
        if wake is not None:
            wake()
    return answer(PlanStatusQueued(alerts=[a.name for a in chosen]), 202)
