"""``create_app``: the API's routers under both base paths, its error answers, its OpenAPI document.

Owns: how the routers (``PARTS``: runs, batch, placement, rerun, workers, cluster, sources,
drives, secrets, suspend, teams, audit, usage, budgets, alerts) are put together:
under ``/api`` and under ``$WS_API`` (``/api/v1/orgs/{org}/workspaces/{workspace}/clusters/
{cluster}/api``), each behind the bearer token (and, on the long form, the workspace check);
the exception handlers that turn ``ApiError``, a refused body (``body.BodyRefused``), pydantic's
validation errors and the store's errors into answers (a full disk: a 503 in the words of
``store.full``, for every write; reads go on), and the last resort: any other exception
is a 500 with one line (``wire.Detail``), its traceback logged by the server (no known request
reaches it: tests/hostile/ and the fuzz test hold every route to 4xx); and ``/openapi.json``,
generated from the routes and ``reconciler.wire``'s models, with the two base paths as its
``servers``. Every route is an ``ApiRoute`` (``api_router`` refuses a router whose routes are
not: each would run without the engine's gate). Must not touch: what a route does.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from pathlib import Path as FilePath
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException

from ...runspec.files import published_schema
from ...wire import API, WS_API
from ...wire import models as wire
from ..auth import Role
from ..clock import Clock
from ..engine import Engine
from ..store import StoreError
from ..store.full import disk_full, full_words
from . import (
    alerts,
    audit,
    batch,
    budgets,
    cluster,
    drives,
    metrics,
    placement,
    rerun,
    runs,
    schedules,
    secrets,
    sources,
    suspend,
    teams,
    usage,
    workers,
)
from .body import BodyRefused
from .context import (
    AUDIT_KEEP,
    ApiContext,
    ApiError,
    ApiRoute,
    Scoped,
    admit,
    answer,
    api_context,
    parameter_detail,
    problems_of,
)
from .source_paths import SourcePaths

__all__ = ["create_app", "documented_router", "openapi_document"]

log = logging.getLogger(__name__)

TITLE = "Astraeus (astra's embedded control plane)"
#: The API's version: the ``v1`` of its long base path.
VERSION = "v1"
DESCRIPTION = (
    "The REST API of an Astraeus control plane (astra's CONTRACT §5). Every call needs "
    "`Authorization: Bearer TOKEN` (its role and scope decide what it may call). "
    "The shapes are astra's `reconciler.wire.models`."
)
#: Both base paths serve every route: the long form names the org, workspace and cluster.
SERVERS: list[dict[str, Any]] = [
    {"url": API, "description": "The default org, workspace and cluster."},
    {
        "url": WS_API,
        "description": "A workspace's view of a cluster ($WS_API): 403 outside the token's scope.",
        "variables": {k: {"default": "default"} for k in ("org", "workspace", "cluster")},
    },
]
#: The errors any route may answer.
COMMON_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": wire.Detail, "description": "A query parameter the operation does not take."},
    401: {
        "model": wire.Detail,
        "description": "No token, or another one.",
        "headers": {"WWW-Authenticate": {"schema": {"type": "string"}}},
    },
    403: {
        "model": wire.Detail,
        "description": "Outside the token's scope or role (its words name the scope it holds), "
        "or a workspace or cluster that does not exist.",
    },
    503: {"model": wire.Detail, "description": "The server's store cannot be used."},
}

bearer = HTTPBearer(auto_error=False, description="The server's token.")


async def authorize(
    _api: Annotated[Scoped, Depends(api_context)],
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    """The bearer token, declared through ``bearer`` so the document says so (``ApiRoute`` checked
    it, the scope and the role before any dependency runs: ``context.admit``)."""


#: The modules whose routers make the API.
PARTS = (
    runs,
    batch,
    placement,
    rerun,
    schedules,
    workers,
    cluster,
    sources,
    suspend,
    drives,
    secrets,
    teams,
    audit,
    usage,
    budgets,
    alerts,
)


def _routers(part: Any) -> list[APIRouter]:
    """A part's routers: ``router``, and ``admin`` where it has one (``teams``)."""
    return [part.router, *([part.admin] if hasattr(part, "admin") else [])]


#: The answer to a body larger than ``body.BODY_MAX_BYTES``: listed under every operation that takes one.
TOO_LARGE: dict[str, Any] = {
    "description": "The body is larger than 16 MiB.",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Detail"}}},
}


def api_router(*, documented: bool = True) -> APIRouter:
    """Every route of the API, relative to a base path, behind the token. Each must be an
    ``ApiRoute`` (``APIRouter(route_class=ApiRoute)``): one that is not would use the engine
    without its gate, and read its body without the strict reader. ``documented``: with
    ``authorize``, which declares the token to the OpenAPI document and checks nothing (the
    router the app serves goes without it: solved at every call, it cost each request its time)."""
    router = APIRouter(dependencies=[Depends(authorize)] if documented else [], responses=COMMON_ERRORS)
    for part in PARTS:
        for one in _routers(part):
            loose = [r.path for r in one.routes if isinstance(r, APIRoute) and not isinstance(r, ApiRoute)]
            if loose:
                raise TypeError(
                    f"{part.__name__}: {loose} are not ApiRoutes: give the router route_class=ApiRoute"
                )
            router.include_router(one)
    return router


def documented_router(router: APIRouter | None = None) -> APIRouter:
    """What ``/openapi.json`` describes: the API's routes (``router``, else a new ``api_router``)
    and the public ones (the webhook), under no base path (the document's ``servers`` name both)."""
    documented = APIRouter()
    documented.include_router(router or api_router())
    documented.include_router(sources.public, responses={k: COMMON_ERRORS[k] for k in (403, 503)})
    return documented


def create_app(
    engine: Engine,
    token: str,
    clock: Clock,
    *,
    on_change: Callable[[], None] = lambda: None,
    executor_name: str = "process",
    clusters: dict[str, Engine] | None = None,
    audit_keep: int = AUDIT_KEEP,
    drives_root: FilePath | None = None,
    private_folders: dict[str, FilePath] | None = None,
) -> FastAPI:
    """The API over ``engine`` (the default cluster's; ``clusters``: the others', by name);
    ``on_change`` is called after a write (to wake the scheduler); each workspace's audit trail
    keeps its newest ``audit_keep`` events; ``drives_root``: where a drive given no folder is
    made (``HOME/drives``); ``private_folders``: the folders no drive's ``path`` may lie in or
    hold, by what they are (astra's home, the runs' working folders). ``token`` is the admin of
    org ``default``."""
    app = _App(title=TITLE, description=DESCRIPTION, version=VERSION, docs_url=None, redoc_url=None)
    app.state.drives_root = drives_root
    app.state.private_folders = {what: os.path.realpath(f) for what, f in (private_folders or {}).items()}
    app.state.astra = ApiContext(
        engine, token, clock, on_change, executor_name, clusters=clusters or {}, audit_keep=audit_keep
    )
    # the console's pages, /metrics and /healthz first: their paths share no prefix with the
    # API's (/api), so the order changes no answer, and a page is matched in a few steps where
    # behind the API it was tried against each of its routes under both base paths (FastAPI
    # matches in order, routers included whole: about a millisecond a page)
    from ..console import mount  # here: the console reads the API's own modules

    mount(app)
    metrics.mount(app)

    @app.get("/healthz", include_in_schema=False, response_model=wire.Health)
    async def healthz() -> Response:
        return answer(wire.Health(ok=True))

    # what the app serves, without the dependency that only declares the token (``authorize``,
    # which checks nothing, ``ApiRoute`` does: it is the document's, ``app.state.router``)
    router = api_router(documented=False)
    app.state.router = documented_router()
    app.include_router(router, prefix=API, include_in_schema=False)
    app.include_router(router, prefix=WS_API, include_in_schema=False)
    app.include_router(sources.public, prefix=API, include_in_schema=False)  # signed, no bearer token
    app.include_router(sources.public, prefix=WS_API, include_in_schema=False)
    app.add_middleware(metrics.RequestMetrics)  # inside SourcePaths: it sees the scope routed
    app.add_middleware(SourcePaths)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(StoreError, _store_error)
    app.add_exception_handler(SQLAlchemyError, _full)
    app.add_exception_handler(OSError, _full)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
    return app


class _App(FastAPI):
    """FastAPI, whose ``/openapi.json`` is ``openapi_document`` of the API's router."""

    def openapi(self) -> dict[str, Any]:
        if self.openapi_schema is None:
            self.openapi_schema = openapi_document(self.state.router)
        return self.openapi_schema


def openapi_document(router: APIRouter) -> dict[str, Any]:
    """The OpenAPI document of ``router``'s routes, under both base paths (its ``servers``),
    with ``RunDocument``, the body of POST and PUT /runs: the published run schema (generated
    from ``wire.RunDocument``, the spec layer's model, and what ``validate_data`` enforces), its
    definitions as ``RunDocument.NAME``, less its ``template``: the cluster takes final run specs
    (a body naming a template is a 422), so ``spec`` is required and whole."""
    doc = get_openapi(
        title=TITLE, version=VERSION, description=DESCRIPTION, routes=router.routes, servers=SERVERS
    )
    _without_default_422(doc)
    for item in doc.get("paths", {}).values():
        for operation in item.values():
            if "requestBody" in operation:
                operation["responses"].setdefault("413", TOO_LARGE)
            for parameter in operation.get("parameters", []):
                if parameter["in"] in ("query", "header"):
                    parameter["schema"] = _without_null(parameter["schema"])
    schema = {k: v for k, v in published_schema("run").items() if k not in ("$schema", "$id")}
    definitions = schema.pop("definitions", {})
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas["RunDocument"] = _refs_to_components(_final_run(schema))
    schemas.update({f"RunDocument.{k}": _refs_to_components(v) for k, v in definitions.items()})
    return doc


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A query's or a header's schema without its ``null`` branch (``str | None`` in Python): on
    the wire such a parameter is absent or text, never null."""
    branches = [b for b in schema.get("anyOf", []) if b != {"type": "null"}]
    if len(branches) != 1 or len(schema["anyOf"]) != 2:
        return schema
    return {**{k: v for k, v in schema.items() if k != "anyOf"}, **branches[0]}


def _final_run(schema: dict[str, Any]) -> dict[str, Any]:
    """The run schema's top level without ``template`` (and the partial spec that goes with it)."""
    top = {k: v for k, v in schema.items() if k != "allOf"}
    properties = {k: v for k, v in schema["properties"].items() if k != "template"}
    properties["spec"] = {"$ref": "#/definitions/Spec"}
    return {**top, "properties": properties, "required": ["metadata", "spec"]}


def _without_default_422(doc: dict[str, Any]) -> None:
    """Drop the 422 FastAPI adds to every route with a parameter: where a route can answer 422
    it declares its own (``wire.Problems`` or ``wire.Detail``); the others' parameters are
    plain strings, which nothing refuses."""
    default = "#/components/schemas/HTTPValidationError"
    for item in doc.get("paths", {}).values():
        for operation in item.values():
            schema = operation["responses"].get("422", {}).get("content", {}).get("application/json", {})
            if schema.get("schema", {}).get("$ref") == default:
                del operation["responses"]["422"]
    schemas = doc.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)


def _refs_to_components(node: Any) -> Any:
    """A draft-07 schema's ``#/definitions/X`` references as ``#/components/schemas/RunDocument.X``."""
    if isinstance(node, dict):
        return {
            k: v.replace("#/definitions/", "#/components/schemas/RunDocument.")
            if k == "$ref" and isinstance(v, str)
            else _refs_to_components(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_refs_to_components(v) for v in node]
    return node


async def _api_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return answer(exc.body, exc.status, exc.headers)


async def _invalid(request: Request, exc: Exception) -> Response:
    """A request pydantic refused: 422, after the token's check (a body that is not JSON is read
    before any dependency runs: 401 and 403 still come first). A body's problems are answered
    as ``wire.Problems``, one per field; a parameter's (``?view=``) as a ``wire.Detail``."""
    assert isinstance(exc, RequestValidationError)
    refused = _refused(request)
    if refused is not None:
        return refused
    errors = exc.errors()
    if all((e.get("loc") or ("body",))[0] == "body" for e in errors):
        return answer(problems_of(errors), 422)
    return answer(parameter_detail([e for e in errors if e["loc"][0] != "body"]), 422)


async def _http_error(request: Request, exc: Exception) -> Response:
    """A refused body (``BodyRefused``: read after the token's check), and Starlette's own
    answers (405: a path served, not with this method; 404: no route): under a base path, the
    token's check comes first, as for every route."""
    if isinstance(exc, BodyRefused):
        return answer(exc.body, exc.status_code)
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code != 405:
        return await http_exception_handler(request, exc)
    refused = _refused(request)
    if refused is not None:
        return refused
    methods = _methods_at(request)
    detail = f"{request.method} is not served here; this path takes {', '.join(methods)}"
    return answer(wire.Detail(detail=detail), 405, {"Allow": ", ".join(methods)})


#: A request's path under either base path: what the API's router's routes match.
_UNDER_BASE = re.compile(r"^/api(?:/v1/orgs/[^/]+/workspaces/[^/]+/clusters/[^/]+/api)?(/.*)$")


def _methods_at(request: Request) -> list[str]:
    """Every method the API serves at the request's path (Starlette's 405 names only those of
    the first route it tried; ``Allow`` must list them all)."""
    found = _UNDER_BASE.match(request.scope["path"])
    under = found.group(1) if found else request.scope["path"]
    routers = [r for part in PARTS for r in _routers(part)] + [sources.public]
    routes = [r for router in routers for r in router.routes if isinstance(r, APIRoute)]
    return sorted({m for r in routes if r.path_regex.match(under) for m in r.methods or ()})


def _refused(request: Request) -> Response | None:
    """The token's answer (401, 403) to a request to the API, if it has one."""
    if not request.url.path.startswith(API + "/"):
        return None
    role = Role.READ if request.method in ("GET", "HEAD") else Role.WRITE
    try:
        admit(request, request.app.state.astra, role)
    except ApiError as refused:
        return answer(refused.body, refused.status, refused.headers)
    return None


async def _store_error(_request: Request, exc: Exception) -> Response:
    return answer(wire.Detail(detail=str(exc)), 503)


async def _full(request: Request, exc: Exception) -> Response:
    """A full disk (``store.full``): a 503 in words, the server's log one line; any other error
    of the database or the system goes on to the last resort (``_unexpected``)."""
    if not disk_full(exc):
        raise exc
    said = full_words(request.app.state.astra.engine.store.url)
    log.warning("%s %s: %s", request.method, request.url.path, said)
    return answer(wire.Detail(detail=said), 503, {"Retry-After": "60"})


async def _unexpected(_request: Request, exc: Exception) -> Response:
    """The last resort: a 500 in one line. Starlette raises the exception again once this is
    sent, so the server (uvicorn) logs its traceback; a test client sees it raised."""
    said = f"internal error ({type(exc).__name__}): the server's log has the details"
    return answer(wire.Detail(detail=said), 500)
