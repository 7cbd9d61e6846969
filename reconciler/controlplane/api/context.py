"""What every route of the API shares: the server's context, its errors, and how answers are sent.

Owns: ``ApiContext`` (what the app works with: each cluster's engine, the clock, the tokens
(``controlplane.auth.Tokens``), the workspaces there are, the caches, and the engines' ``gate``;
kept on the app), ``Scoped`` (one call's view of it: who calls, the scope its path names and
that cluster's engine; handed to routes by the ``Api`` dependency), ``ApiRoute`` (the class of
every route of the API), ``ApiError`` (an error answer: a status and a ``wire`` body),
``admit`` (the bearer token, the scope and the role, the same rule for every route),
``problems_of`` (pydantic's validation errors as the API's 422 body: ``wire.Problems``), and the
helpers that send answers (``answer``, ``json_text``) and read a run document (``read_json``).

**The gate.** The engine (and its store) is changed by one thread at a time, and the event loop
is never the one that does its long work. ``ApiContext.gate`` is a readers–writer lock
(``gate.Gate``): the server's scheduling loop holds it alone while ``Engine.step`` runs in a
worker thread; a route that changes something (any method but GET and HEAD) holds it alone
while it runs; a GET (what a ``read`` token may call: it changes nothing) holds it shared, with
the other reads, so reads run together and wait only for a step or a write, and a step or a
write waits for the reads that hold it (a read sees the state before a step or after it, never
half). A route whose work grows with the cluster (a listing, a run's workers or events, a run
cancelled with its 10,000 workers) is a plain function, which FastAPI runs in its thread pool;
a route whose work is bounded by its request (one run created or updated, one inventory entry,
the lock: what an apply sends for every run) is ``async`` and runs on the loop, sparing each
one a thread's hand-off. Either way ``/healthz`` (which takes no gate) answers at once.
Dependencies are ``async`` and quick. What reads share besides the state (``ResponseCache``) is
safe to use from several threads at once.

**Who may.** ``admit``: a token this server does not know (or one revoked) is 401; a path naming
a workspace outside the token's scope, or a call its role does not allow (``read`` for a GET,
``write`` for any other, ``admin`` for an ``AdminRoute``), is 403 in words naming the scope it
holds (``auth.Identity.refusal``); so is a workspace or cluster that does not exist (the path's
``/api`` alone is the default org, workspace and cluster).

**Before the gate.** ``ApiRoute`` checks the token first (401 and 403 before any byte of a body is
read), then reads the body (bounded: ``body.read_body``), and only then waits for the gate: a
client that sends slowly, or not at all, holds nothing. The body is parsed by ``body.strict_json``.

Must not touch: routes, the store's SQL, scheduling rules.
"""

from __future__ import annotations

import difflib
import re
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
from ...wire.alerts import SECRET_NAME, SECRET_NAME_WORDS
from ..auth import Identity, Role, Tokens
from ..clock import Clock
from ..engine import Engine
from ..metrics import Metrics
from ..scopes import DEFAULT, DEFAULT_SCOPE, Scope, run_key, source_key, source_prefix
from .body import StrictRequest, strict_json_off_loop
from .cache import ResponseCache
from .gate import Gate

#: The ``responses`` of a route as FastAPI types them: status → its OpenAPI description.
Responses = dict[int | str, dict[str, Any]]

__all__ = [
    "AUDIT_KEEP",
    "DEFAULT_SCOPE",
    "AdminRoute",
    "Api",
    "ApiContext",
    "ApiError",
    "ApiRoute",
    "PublicRoute",
    "Responses",
    "Scoped",
    "admit",
    "answer",
    "api_context",
    "json_text",
    "parameter_detail",
    "problem",
    "problems_of",
    "read_json",
    "require_org_admin",
    "unknown_query",
]

#: How many audit events each workspace keeps (``astra server --audit-keep``).
AUDIT_KEEP = 10_000


@dataclass
class ApiContext:
    """What the routes work with: one per app (``app.state.astra``). ``engine`` is the default
    cluster's; ``clusters`` names every cluster's (the default's too, once made)."""

    engine: Engine
    token: str
    clock: Clock
    #: called after a write (to wake the scheduler)
    on_change: Callable[[], None] = lambda: None
    executor_name: str = "process"
    clusters: dict[str, Engine] = field(default_factory=dict)
    #: the newest audit events each workspace keeps
    audit_keep: int = AUDIT_KEEP
    tokens: Tokens = field(init=False)
    #: (org, workspace) of every workspace there is
    workspaces: set[tuple[str, str]] = field(init=False)
    caches: dict[Scope, ResponseCache] = field(init=False)
    #: held by whoever uses the engines: a route (``ApiRoute``; a GET shared), the scheduling
    #: loop's step (alone)
    gate: Gate = field(init=False)
    #: what ``/metrics`` says (``controlplane.metrics``): one per app
    metrics: Metrics = field(init=False)

    def __post_init__(self) -> None:
        self.clusters = {DEFAULT: self.engine, **self.clusters}
        store = self.engine.store
        self.tokens = Tokens(self.token, store)
        self.workspaces = {(DEFAULT, w) for w in store.workspace_names(DEFAULT)}
        self.caches = {}
        self.gate = Gate()
        self.metrics = Metrics(lambda: self.clusters, lambda: self.engine.store, self.clock.now)

    @property
    def cache(self) -> ResponseCache:
        """The default scope's listings."""
        return self.cache_of(DEFAULT_SCOPE)

    def cache_of(self, scope: Scope) -> ResponseCache:
        cache = self.caches.get(scope)
        if cache is None:  # two reads at once keep the same one
            cache = self.caches.setdefault(scope, ResponseCache(self.clusters[scope.cluster], scope))
        return cache

    def add_workspace(self, org: str, name: str) -> bool:
        """Make workspace ``name`` of ``org`` unless it is there; whether it was made now."""
        if (org, name) in self.workspaces:
            return False
        made = self.engine.store.add_workspace(org, name, self.clock.now())
        self.workspaces.add((org, name))
        return made


@dataclass
class Scoped:
    """One call's view (the ``Api`` of a route): who calls, the scope its path names (``/api``
    alone: the default one) and that cluster's engine."""

    app: ApiContext
    scope: Scope
    caller: Identity | None
    engine: Engine

    @property
    def clock(self) -> Clock:
        return self.app.clock

    @property
    def cache(self) -> ResponseCache:
        return self.app.cache_of(self.scope)

    @property
    def executor_name(self) -> str:
        return self.app.executor_name

    def on_change(self) -> None:
        self.app.on_change()

    def key(self, name: str) -> str:
        """The key of run (or worker) ``name`` of this scope (``scopes.run_key``)."""
        return run_key(self.scope, name)

    def source_key(self, name: str) -> str:
        """The key of this scope's source ``name`` (``scopes.source_key``)."""
        return source_key(self.scope, name)

    def source_prefix(self) -> str:
        """What this scope's source keys start with ('': the default scope's)."""
        return "" if self.scope == DEFAULT_SCOPE else source_prefix(self.scope)

    def runs(self) -> list[str]:
        """The keys of this scope's runs, in submission order."""
        return self.engine.runs_of(self.scope)

    def runs_url(self, request: Request) -> str:
        """The runs' URL under the long base path (a run's own URL is this and its name)."""
        org, workspace, cluster = self.scope
        root = str(request.base_url).rstrip("/")
        return root + WS_API.format(org=org, workspace=workspace, cluster=cluster) + "/runs/"

    def audit(
        self,
        action: str,
        kind: str,
        name: str,
        detail: dict[str, Any] | None = None,
        *,
        source: str | None = None,
        workspace: str | None = None,
    ) -> None:
        """Record a write in the audit trail of the call's workspace (or of ``workspace``, of the
        same org): who, where, when, what changed."""
        self.audit_many([(action, kind, name, detail, source)], workspace=workspace)

    def audit_many(
        self,
        writes: list[tuple[str, str, str, dict[str, Any] | None, str | None]],
        *,
        workspace: str | None = None,
    ) -> None:
        """``audit`` of many writes (``(action, kind, name, detail, source)`` each), in one
        transaction of the store."""
        self.app.engine.store.add_audit(*self.audit_events(writes, workspace=workspace))

    def audit_events(
        self,
        writes: list[tuple[str, str, str, dict[str, Any] | None, str | None]],
        *,
        workspace: str | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        """The audit events of ``writes`` (as ``audit_many``), and how many events a workspace
        keeps: for a write that records them in its own transaction (a batch of runs)."""
        now = self.clock.now()
        token = self.caller.name if self.caller is not None else "-"
        events = [
            {
                "at": now,
                "org": self.scope.org,
                "workspace": workspace or self.scope.workspace,
                "cluster": self.scope.cluster,
                "token": token,
                "action": action,
                "kind": kind,
                "name": name,
                "source": source,
                "detail": detail or {},
            }
            for action, kind, name, detail, source in writes
        ]
        return events, self.app.audit_keep


async def api_context(request: Request) -> Scoped:
    return request.state.scoped


#: The call's view, as a route's parameter.
Api = Annotated[Scoped, Depends(api_context)]


def require_org_admin(api: Scoped, what: str) -> None:
    """403 unless the caller is an admin of the whole org (the server's own token is): ``what``
    (making a workspace, setting a quota, naming a host folder) is beyond one workspace."""
    caller = api.caller
    if caller is not None and (caller.workspace is not None or not caller.may(Role.ADMIN)):
        words = f"this token ({caller.name}) holds {caller.words()}: {what} needs the org's admin"
        raise ApiError(403, wire.Detail(detail=words))


class ApiError(Exception):
    """An error answer: its status, its body (a ``wire`` model) and any headers."""

    def __init__(self, status: int, body: BaseModel, headers: dict[str, str] | None = None):
        super().__init__(status)
        self.status, self.body, self.headers = status, body, headers


class ApiRoute(APIRoute):
    """The class of every route of the API (``APIRouter(route_class=ApiRoute)``): the token is
    checked, the query held to the parameters the route declares (400 for any other: a typo as
    ``?veiw=summary`` is not silently ignored), the body read (bounded, and parsed strictly when
    FastAPI asks for it as JSON), and only then the route runs, holding the engine's gate: shared
    for a GET or HEAD, alone for any other method (see the module's docstring)."""

    #: whether the bearer token is checked (a ``PublicRoute`` carries its own authentication)
    bearer = True
    #: the role a call needs (``None``: ``read`` for GET, ``write`` for any other method)
    needs: Role | None = None

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        known = _query_names(self.dependant)
        reads = set(self.methods or ()) <= {"GET", "HEAD"}
        role = self.needs or (Role.READ if reads else Role.WRITE)

        async def gated(request: Request) -> Response:
            api: ApiContext = request.app.state.astra
            request.state.scoped = admit(request, api, role if self.bearer else None)
            unknown = next((k for k in request.query_params if k not in known), None)
            if unknown is not None:
                raise ApiError(400, wire.Detail(detail=unknown_query(unknown, known)))
            strict = StrictRequest(request.scope, request.receive)
            await strict.body()
            async with api.gate.shared() if reads else api.gate:
                return await handler(strict)

        return gated


#: The webhook's headers: GitHub's signature, GitLab's secret token.
SIGNATURE = "X-Hub-Signature-256"
GITLAB_TOKEN = "X-Gitlab-Token"


def unsigned(source: str | None) -> str:
    """The one refusal of a webhook call that is not signed with its source's secret: the same
    whether the workspace, the source or its secret exists or not (nothing to probe with)."""
    name = source or "NAME"
    return (
        f"the call is not signed with source {name}'s webhook secret: send {SIGNATURE} "
        f"(GitHub) or {GITLAB_TOKEN} (GitLab), made with the secret set by PUT /sources/{name}/hook"
    )


class PublicRoute(ApiRoute):
    """An ``ApiRoute`` that carries its own authentication (the webhook's signature), not the
    bearer token; its query and body are held to the same rules."""

    bearer = False


class AdminRoute(ApiRoute):
    """An ``ApiRoute`` whose every call needs an ``admin`` token (tokens, quotas)."""

    needs = Role.ADMIN


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


#: A path under the long base path: its org, workspace and cluster.
_LONG = re.compile(r"^/api/v1/orgs/([^/]+)/workspaces/([^/]+)/clusters/([^/]+)/api(?:/|$)")


def path_scope(request: Request) -> Scope:
    """The scope a request's path names (``/api`` alone: the default one)."""
    p = request.scope.get("path_params") or {}
    if "org" in p and "workspace" in p and "cluster" in p:
        return Scope(p["org"], p["workspace"], p["cluster"])
    found = _LONG.match(request.scope["path"])
    return Scope(*found.groups()) if found else DEFAULT_SCOPE


def admit(request: Request, api: ApiContext, role: Role | None) -> Scoped:
    """The call's view, when it may be made: 401 unless ``Authorization: Bearer TOKEN`` names a
    token this server knows (``role`` None: no token is asked, the route has its own check);
    403 when the path's workspace is outside the token's scope, when ``role`` is more than its
    role, or when the workspace or the cluster does not exist."""
    caller = None
    if role is not None:
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        caller = api.tokens.identify(value.strip()) if scheme.lower() == "bearer" else None
        if caller is None:
            what = "an unknown (or revoked) token" if given else "no token"
            raise ApiError(
                401,
                wire.Detail(detail=f"{what}: send 'Authorization: Bearer TOKEN'"),
                {"WWW-Authenticate": "Bearer"},
            )
    scope = path_scope(request)
    org, workspace, cluster = scope
    if caller is not None:
        refused = caller.refusal(org, workspace, role or Role.READ)
        if refused is not None:
            raise ApiError(403, wire.Detail(detail=refused))
    engine = api.clusters.get(cluster)
    if role is None and (engine is None or (org, workspace) not in api.workspaces):
        # a public call (the webhook) tells no one which workspaces exist: its own refusal
        raise ApiError(
            401, wire.Detail(detail=unsigned((request.scope.get("path_params") or {}).get("name")))
        )
    if engine is None:
        have = ", ".join(sorted(api.clusters))
        raise ApiError(403, wire.Detail(detail=f"no cluster named {cluster} on this server (it has {have})"))
    if (org, workspace) not in api.workspaces:
        raise ApiError(
            403,
            wire.Detail(
                detail=f"no workspace {workspace} in org {org}: an admin of the org makes it "
                f"(astra quota set {workspace}, or astra token create NAME --workspace {workspace})"
            ),
        )
    return Scoped(api, scope, caller, engine)


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
        if ctx.get("pattern") == SECRET_NAME:  # a sink's url, key or token: a secret's name
            return SECRET_NAME_WORDS
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
    ``unknown view 'x': 'summary', 'full' or 'brief'``, ``attempt must be at least 0``."""
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


def json_text(text: str | bytes, *, status: int = 200, tag: str | None = None) -> Response:
    """JSON already put together (the store's texts, a cached listing): sent as it is."""
    return Response(
        text, status_code=status, media_type="application/json", headers={"ETag": tag} if tag else None
    )


async def read_json(request: Request) -> Any:
    """The body as JSON, its values left to the caller: a run document is read this way, and
    ``validate_data`` names every value past a limit, with every other problem, at once."""
    return await strict_json_off_loop(await request.body(), values=False)
