"""What every route of the API shares: the server's context, its errors, and how answers are sent.

Owns: ``ApiContext`` (the engine, clock, token and scope a route works with, kept on the app and
handed to routes by the ``Api`` dependency, and the engine's ``gate``), ``ApiRoute`` (the class
of every route of the API), ``ApiError`` (an error answer: a status and a ``wire`` body),
``check_token`` (the bearer token and the workspace, the same rule for every route),
``problems_of`` (pydantic's validation errors as the API's 422 body: ``wire.Problems``), and the
helpers that send answers (``answer``, ``json_text``) and read a run document (``read_json``).

**The gate.** The engine (and its store) is used by one thread at a time, and the event loop is
never the one that does its long work. ``ApiContext.gate`` is one ``asyncio.Lock``: the server's
scheduling loop holds it while ``Engine.step`` runs in a worker thread, and every route holds it
while it runs (``ApiRoute``). A route whose work grows with the cluster (a listing, a run's
workers or events, a run cancelled with its 10,000 workers) is a plain function, which FastAPI
runs in its thread pool; a route whose work is bounded by its request (one run created or
updated, one inventory entry, the lock: what an apply sends for every run) is ``async`` and runs
on the loop, sparing each one a thread's hand-off. Either way ``/healthz`` (which takes no gate)
answers at once. Dependencies are ``async`` and quick.

**Before the gate.** ``ApiRoute`` checks the token first (401 and 403 before any byte of a body is
read), then reads the body (bounded: ``body.read_body``), and only then waits for the gate: a
client that sends slowly, or not at all, holds nothing. The body is parsed by ``body.strict_json``.

Must not touch: routes, the store's SQL, scheduling rules.
"""

from __future__ import annotations

import asyncio
import difflib
import hmac
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.dependencies.models import Dependant
from fastapi.responses import Response
from fastapi.routing import APIRoute
from pydantic import BaseModel

from ...runspec.messages import DID_YOU_MEAN
from ...runspec.paths import FieldPath
from ...wire import WS_API
from ...wire import models as wire
from ..clock import Clock
from ..engine import Engine
from .body import StrictRequest, strict_json_off_loop
from .cache import ResponseCache

#: The ``responses`` of a route as FastAPI types them: status → its OpenAPI description.
Responses = dict[int | str, dict[str, Any]]

__all__ = [
    "DEFAULT_SCOPE",
    "Api",
    "ApiContext",
    "ApiError",
    "ApiRoute",
    "PublicRoute",
    "Responses",
    "answer",
    "api_context",
    "check_token",
    "json_text",
    "parameter_detail",
    "problem",
    "problems_of",
    "read_json",
    "unknown_query",
]

#: (org, workspace, cluster) of the local control plane.
DEFAULT_SCOPE = ("default", "default", "default")


@dataclass
class ApiContext:
    """What the routes work with: one per app (``app.state.astra``)."""

    engine: Engine
    token: str
    clock: Clock
    scope: tuple[str, str, str] = DEFAULT_SCOPE
    #: called after a write (to wake the scheduler)
    on_change: Callable[[], None] = lambda: None
    executor_name: str = "process"
    cache: ResponseCache = field(init=False)
    #: held by whoever uses the engine: a route (``ApiRoute``), the scheduling loop's step
    gate: asyncio.Lock = field(init=False)

    def __post_init__(self) -> None:
        self.cache = ResponseCache(self.engine)
        self.gate = asyncio.Lock()

    def runs_url(self, request: Request) -> str:
        """The runs' URL under the long base path (a run's own URL is this and its name)."""
        org, workspace, cluster = self.scope
        root = str(request.base_url).rstrip("/")
        return root + WS_API.format(org=org, workspace=workspace, cluster=cluster) + "/runs/"


async def api_context(request: Request) -> ApiContext:
    return request.app.state.astra


#: The context, as a route's parameter.
Api = Annotated[ApiContext, Depends(api_context)]


class ApiError(Exception):
    """An error answer: its status, its body (a ``wire`` model) and any headers."""

    def __init__(self, status: int, body: BaseModel, headers: dict[str, str] | None = None):
        super().__init__(status)
        self.status, self.body, self.headers = status, body, headers


class ApiRoute(APIRoute):
    """The class of every route of the API (``APIRouter(route_class=ApiRoute)``): the token is
    checked, the query held to the parameters the route declares (400 for any other: a typo as
    ``?veiw=summary`` is not silently ignored), the body read (bounded, and parsed strictly when
    FastAPI asks for it as JSON), and only then the route runs, holding the engine's gate (see
    the module's docstring)."""

    #: whether the bearer token is checked (a ``PublicRoute`` carries its own authentication)
    bearer = True

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        known = _query_names(self.dependant)

        async def gated(request: Request) -> Response:
            api: ApiContext = request.app.state.astra
            if self.bearer:
                check_token(request, api)
            unknown = next((k for k in request.query_params if k not in known), None)
            if unknown is not None:
                raise ApiError(400, wire.Detail(detail=unknown_query(unknown, known)))
            strict = StrictRequest(request.scope, request.receive)
            await strict.body()
            async with api.gate:
                return await handler(strict)

        return gated


class PublicRoute(ApiRoute):
    """An ``ApiRoute`` that carries its own authentication (the webhook's signature), not the
    bearer token; its query and body are held to the same rules."""

    bearer = False


def _query_names(dependant: Dependant) -> frozenset[str]:
    """The query parameters a route declares, its dependencies' too."""
    names: set[str] = set()
    stack = [dependant]
    while stack:
        found = stack.pop()
        names.update(f.alias for f in found.query_params)
        stack.extend(found.dependencies)
    return frozenset(names)


def unknown_query(name: str, known: frozenset[str]) -> str:
    """``unknown query parameter 'veiw'; did you mean 'view'?`` (or what the call takes)."""
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    if close:
        return f"unknown query parameter '{name}'" + DID_YOU_MEAN.format(suggestion=close[0])
    takes = ", ".join(sorted(known)) or "none"
    return f"unknown query parameter '{name}': this call takes {takes}"


def problem(path: str, message: str) -> ApiError:
    """A 422 naming one problem."""
    return ApiError(422, wire.Problems([wire.Problem(path=path, message=message)]))


def check_token(request: Request, api: ApiContext) -> None:
    """401 unless ``Authorization: Bearer TOKEN`` names the server's token; 403 when the path
    names another org, workspace or cluster than the server's."""
    given = request.headers.get("authorization", "")
    scheme, _, value = given.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), api.token.encode()):
        what = "a wrong token" if given else "no token"
        raise ApiError(
            401,
            wire.Detail(detail=f"{what}: send 'Authorization: Bearer TOKEN'"),
            {"WWW-Authenticate": "Bearer"},
        )
    p = request.path_params
    if "org" in p and (p["org"], p["workspace"], p["cluster"]) != api.scope:
        org, workspace, cluster = api.scope
        raise ApiError(
            403,
            wire.Detail(
                detail=f"this token is for workspace {workspace} of org {org} on cluster {cluster}, "
                f"not workspace {p['workspace']} of org {p['org']} on cluster {p['cluster']}"
            ),
        )


# ---- 422: pydantic's errors in the API's words ---------------------------------------------------

#: pydantic's error types, in the words of the API's 422 answers
WORDS = {
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "list_type": "must be a list",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "int_parsing_size": "must be a whole number that fits in 64 bits",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "string_type": "must be a string",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "missing": "is required",
}


def _words(e: Any) -> str:
    kind, ctx = e.get("type", ""), e.get("ctx") or {}
    if kind in WORDS:
        return WORDS[kind]
    if kind in ("enum", "literal_error"):
        return f"must be {ctx.get('expected')}"
    if kind == "greater_than_equal":
        return f"must be at least {ctx.get('ge')}"
    if kind == "less_than_equal":
        return f"must be at most {ctx.get('le')}"
    if kind == "string_pattern_mismatch":
        return f"must match {ctx.get('pattern')}"
    return str(e.get("msg", "is not valid"))


def problems_of(errors: Sequence[Any]) -> wire.Problems:
    """A body's validation errors (FastAPI's) as a 422's ``wire.Problems``: one per field."""
    out = []
    for e in errors:
        _body, *steps = e.get("loc") or ("body",)
        if e.get("type") == "json_invalid":
            error = (e.get("ctx") or {}).get("error", e.get("msg"))
            out.append(wire.Problem(path="", message=f"the body is not JSON: {error}"))
            continue
        path = str(FieldPath.of(tuple(steps)))
        out.append(wire.Problem(path=path, message=_words(e) if path else f"the body {_words(e)}"))
    return wire.Problems(out)


def parameter_detail(errors: Sequence[Any]) -> wire.Detail:
    """A query's or a header's validation errors as a 422's ``wire.Detail``, in one line:
    ``unknown view 'x': 'summary' or 'full'``, ``attempt must be at least 0``."""
    said = []
    for e in errors:
        # a repeatable parameter's loc ends with the index of the value (``state.0``): its name is enough
        name = ".".join(str(step) for step in (e.get("loc") or ("?", "?"))[1:] if not isinstance(step, int))
        if e.get("type") == "enum":
            said.append(f"unknown {name} '{e.get('input')}': {(e.get('ctx') or {}).get('expected')}")
        else:
            said.append(f"{name} {_words(e)}")
    return wire.Detail(detail="; ".join(said))


# ---- answers -------------------------------------------------------------------------------------


def answer(body: BaseModel, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A ``wire`` model as the answer, with only the fields it was given (an absent label stays
    absent; a ``null`` given stays ``null``)."""
    return Response(
        body.model_dump_json(exclude_unset=True),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


def json_text(text: str, *, status: int = 200, tag: str | None = None) -> Response:
    """JSON already put together (the store's texts, a cached listing): sent as it is."""
    return Response(
        text, status_code=status, media_type="application/json", headers={"ETag": tag} if tag else None
    )


async def read_json(request: Request) -> Any:
    """The body as JSON, its values left to the caller: a run document is read this way, and
    ``validate_data`` names every value past a limit, with every other problem, at once."""
    return await strict_json_off_loop(await request.body(), values=False)
