"""``GET /metrics``: the server's metrics for Prometheus, and the middleware that times every request.

Owns: the route (``mount``: at the server's root, where Prometheus looks by default, outside
both base paths: the metrics are the org's, not one workspace's) and ``RequestMetrics``, the
ASGI middleware that records each request's route template, method, status and duration
(``controlplane.metrics.Metrics.record_request``).

**Who may scrape.** A token with ``read`` (or more) on the whole org: ``astra token create
prometheus --workspace '*' --role read``. The answer is the org's every workspace, so a
workspace's token is refused (403, in words naming what it holds); no token is 401. A token
of org ``acme`` sees acme's workspaces. Why not a metrics-only role: ``read`` already changes
nothing, the scrape shows every workspace of the org anyway, and a role of its own would be one
more rank every check of every route must know (Kubernetes' ``nonResourceURLs`` and Argo CD's
metrics port make the same cut: one read permission for the whole server's figures).

Must not touch: what the metrics are (``controlplane.metrics``), the routes of the API.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from ...wire import models as wire
from ..auth import Role
from ..metrics import route_label
from .context import ApiContext, answer

__all__ = ["PATH", "RequestMetrics", "mount"]

#: Where the metrics are served (Prometheus' default ``metrics_path``).
PATH = "/metrics"


def mount(app: FastAPI) -> None:
    """Serve ``GET /metrics`` on ``app`` (whose ``state.astra`` is the ``ApiContext``)."""

    @app.get(PATH, include_in_schema=False)
    async def metrics(request: Request) -> Response:
        api: ApiContext = request.app.state.astra
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        caller = api.tokens.identify(value.strip()) if scheme.lower() == "bearer" else None
        if caller is None:
            what = "an unknown (or revoked) token" if given else "no token"
            detail = f"{what}: send 'Authorization: Bearer TOKEN' (a token with read on the org)"
            return answer(wire.Detail(detail=detail), 401, {"WWW-Authenticate": "Bearer"})
        if caller.workspace is not None or not caller.may(Role.READ):
            detail = (
                f"this token ({caller.name}) holds {caller.words()}: /metrics needs read on the whole "
                f"org (astra token create prometheus --workspace '*' --role read)"
            )
            return answer(wire.Detail(detail=detail), 403)
        async with api.gate:  # the scheduler's state, read while no step changes it
            body = await asyncio.to_thread(api.metrics.exposition, caller.org)
        return Response(body, media_type=CONTENT_TYPE_LATEST)


class RequestMetrics:
    """ASGI middleware: every HTTP request's route template, method, status and duration."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def sent(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None)
            api: ApiContext | None = getattr(getattr(scope.get("app"), "state", None), "astra", None)
            if api is not None:
                seconds = time.perf_counter() - started
                api.metrics.record_request(route_label(template), scope["method"], status[0], seconds)
