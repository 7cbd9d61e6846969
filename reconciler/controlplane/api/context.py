"""What every route of the API shares: the server's context, its errors, and how answers are sent.

Owns: ``ApiContext`` (the engine, clock, token and scope a route works with, kept on the app and
handed to routes by the ``Api`` dependency), ``ApiError`` (an error answer: a status and a
``wire`` body), ``check_token`` (the bearer token and the workspace, the same rule for every
route), ``problems_of`` (pydantic's validation errors as the API's 422 body: ``wire.Problems``),
and the helpers that send answers (``answer``, ``json_text``, ``read_json``).

Every dependency here is ``async``: the engine is not thread-safe, and FastAPI runs a plain
function in a thread pool, beside the scheduler's loop.

Must not touch: routes, the store's SQL, scheduling rules.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel

from ...runspec.paths import FieldPath
from ...wire import WS_API
from ...wire import models as wire
from ..clock import Clock
from ..engine import Engine
from .cache import ResponseCache

#: The ``responses`` of a route as FastAPI types them: status → its OpenAPI description.
Responses = dict[int | str, dict[str, Any]]

__all__ = [
    "DEFAULT_SCOPE",
    "Api",
    "ApiContext",
    "ApiError",
    "Responses",
    "answer",
    "api_context",
    "check_token",
    "json_text",
    "parameter_detail",
    "problem",
    "problems_of",
    "read_json",
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

    def __post_init__(self) -> None:
        self.cache = ResponseCache(self.engine)

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
    """The body as JSON (a run document is read this way: ``validate_data`` has the words)."""
    raw = await request.body()
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise problem("", f"the body is not JSON: {exc}") from exc
