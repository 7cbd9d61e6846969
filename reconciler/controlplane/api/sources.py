"""Sources (``/sources/...``): each reconcile source's memory, kept with the cluster.

Owns the sources' routes. The server keeps a source as its own row (resource_version, lock,
status, history) and one row per run of its inventory, so an apply writes one small entry per
run, never the whole state. The shapes are ``reconciler.wire.models``'s (``SourceState``,
``InventoryEntry``, ``Written``, ``Lock`` …); the store puts the large answers together from
its stored texts, and they are sent as they are. Must not touch: SQL (the ``Store``'s), runs.

The rules the routes keep:

* **Tags.** A source's ETag is ``"RV-LOCKID"``: it changes with every write and with every lock
  taken or released. ``GET /sources/{name}`` and ``…/runs`` answer 304 (no body) when
  ``If-None-Match`` names it; every write answers the tag after it, so a client that knows the
  tag its own write leads to keeps what it read.
* **The lock.** ``PUT``/``DELETE …/runs/{run}`` and ``POST …/history`` are made under the apply
  lock and must name it (``X-Astra-Lock: LOCK_ID``, or ``?lock=LOCK_ID``): 409 ``LockHeld``
  when it is missing or not the lock held. ``PUT …/status`` (the reconcile loop writes it
  between applies) and a whole ``PUT`` need none, but are held to the same rule when they name
  one. Every write but the lock's adds one to the source's resource_version.
* **Names.** A source's name may hold '/': see ``source_paths`` (the path's ``{name}`` is one
  segment, percent-encoded whole). Each workspace has its own sources: the store keeps each
  under its key (``Scoped.source_key``), a name is unique within a workspace.
* **The audit trail.** A whole ``PUT``, an apply's record (``POST …/history``) and a deletion
  are recorded (``Scoped.audit``), with the source's name.
* **The webhook.** ``POST /sources/{name}/hook`` (``public``: no bearer token, since GitHub and
  GitLab cannot send one) is authenticated by the source's secret instead: GitHub's
  ``X-Hub-Signature-256: sha256=HMAC-SHA256(secret, body)`` or GitLab's ``X-Gitlab-Token:
  secret``, each compared in constant time; one 401, in the same words, without a secret set,
  without a signature, with a wrong one, and for a workspace or cluster that does not exist
  (``context.unsigned``: nothing to probe which workspaces or sources there are); 409 while the
  source is suspended (the call is not counted). A signed
  call adds one to the source's count, which a watch reads (``GET …/hook``) to start its next
  pass at once. The secret is set by ``PUT …/hook`` (the bearer
  token's; a watch sets it when it starts) and kept in the server's memory only: it is never
  answered, never in the store, and a restarted server has none until the watch sets it again.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import uuid
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import unquote

from fastapi import APIRouter, Body, Depends, Header, Path, Query, Request
from fastapi.responses import Response

from ...wire import LOCK_HEADER
from ...wire import models as wire
from ..store import LockMismatch, NotFound, Stale
from .alerts import notice_status
from .context import (
    GITLAB_TOKEN,
    SIGNATURE,
    Api,
    ApiError,
    ApiRoute,
    PublicRoute,
    Responses,
    answer,
    json_text,
    unsigned,
)

__all__ = ["public", "router"]

router = APIRouter(tags=["sources"], route_class=ApiRoute)
#: The routes that carry their own authentication (the webhook's signature), not the bearer token.
public = APIRouter(tags=["sources"], route_class=PublicRoute)

#: Keys of a whole PUT that are the server's, never kept as the source's own.
SERVER_KEYS = frozenset({"name", "resource_version", "lock", "lock_id"})


async def source_name(
    name: Annotated[str, Path(description="The source's name, percent-encoded whole ('/' as %2F).")],
) -> str:
    return unquote(name)


async def run_name(run: Annotated[str, Path(description="The run's name.")]) -> str:
    return unquote(run)


async def lock_given(
    header: Annotated[
        str | None,
        Header(alias=LOCK_HEADER, description="The id of the apply lock this write is made under."),
    ] = None,
    lock: Annotated[str | None, Query(description=f"As {LOCK_HEADER}, in the query.")] = None,
) -> str | None:
    """The lock a write is made under: the header, else the ``?lock=`` query parameter."""
    return header or lock or None


Name = Annotated[str, Depends(source_name)]
RunName = Annotated[str, Depends(run_name)]
LockId = Annotated[str | None, Depends(lock_given)]
IfNoneMatch = Annotated[
    str | None, Header(description="A tag read before: 304, no body, when the source is as it was.")
]

TAG: dict[str, Any] = {
    "ETag": {"description": 'The source\'s tag, "RV-LOCKID".', "schema": {"type": "string"}}
}
NOT_MODIFIED: Responses = {
    304: {"description": "Not modified since the tag in If-None-Match.", "headers": TAG}
}
NOT_FOUND: Responses = {404: {"model": wire.Detail}}
LOCK_HELD: Responses = {409: {"model": wire.LockHeld}}
INVALID: Responses = {422: {"model": wire.Problems, "description": "The body's problems, one per field."}}
BAD_VIEW: Responses = {422: {"model": wire.Detail, "description": "An unknown view."}}


def _locked_words(name: str, held: dict[str, Any]) -> str:
    since = held.get("created_at")
    when = dt.datetime.fromtimestamp(since, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if since else "?"
    return f"source {name} is locked by {held.get('owner')} since {when} (lock {held.get('id')})"


def _lock(held: dict[str, Any] | None) -> wire.Lock | None:
    return None if held is None else wire.Lock.model_validate(held)


def _lock_held(exc: LockMismatch) -> ApiError:
    return ApiError(409, wire.LockHeld(detail=str(exc), lock=_lock(exc.lock)))


def _unchanged(api: Api, name: str, if_none_match: str | None) -> Response | None:
    """304 when ``If-None-Match`` names the source's tag (``None`` when it does not); 404 when
    the source was never written."""
    tag = api.engine.store.source_tag(api.source_key(name))
    if tag is None:
        raise ApiError(404, wire.Detail(detail=f"no source named {name}"))
    if tag in {t.strip() for t in (if_none_match or "").split(",")}:
        return Response(status_code=304, headers={"ETag": tag})
    return None


def _written(api: Api, name: str, rv: int, status: int = 200) -> Response:
    tag = api.engine.store.source_tag(api.source_key(name))
    return answer(wire.Written(name=name, resource_version=rv), status, {"ETag": tag} if tag else None)


@router.get("/sources", operation_id="list_sources", response_model=wire.SourceList)
def list_sources(api: Api) -> Response:
    """Every source's state, by name."""
    return json_text(api.engine.store.list_sources_json(api.source_prefix()))


@router.get(
    "/sources/{name}",
    operation_id="get_source",
    response_model=wire.SourceState,
    responses={200: {"headers": TAG}, **NOT_MODIFIED, **NOT_FOUND},
)
def get_source(api: Api, name: Name, if_none_match: IfNoneMatch = None) -> Response:
    """A source's whole state (404 when it was never written)."""
    unchanged = _unchanged(api, name, if_none_match)
    if unchanged is not None:
        return unchanged
    found = api.engine.store.get_source_json(api.source_key(name))
    if found is None:  # it holds nothing (deleted)
        raise ApiError(404, wire.Detail(detail=f"no source named {name}"))
    return json_text(found[0], tag=found[1])


@router.put(
    "/sources/{name}",
    operation_id="put_source",
    response_model=wire.SourceState,
    responses={200: {"headers": TAG}, 409: {"model": wire.StaleDetail | wire.LockHeld}, **INVALID},
)
def put_source(api: Api, name: Name, body: wire.SourceWrite, lock_id: LockId) -> Response:
    """Replace a source's whole state, naming the ``resource_version`` read (409 when stale)."""
    given = body.model_dump(exclude_unset=True)
    data = {k: v for k, v in given.items() if k not in SERVER_KEYS}
    expected = body.resource_version if body.resource_version is not None else 0
    store = api.engine.store
    try:
        store.put_source(api.source_key(name), data, expected, api.clock.now(), body.lock_id or lock_id)
    except Stale as exc:
        raise ApiError(409, wire.StaleDetail(detail=str(exc), resource_version=exc.current)) from exc
    except LockMismatch as exc:
        raise _lock_held(exc) from exc
    api.audit("update", "source", name, {"keys": sorted(data)}, source=name)
    found = store.get_source_json(api.source_key(name), empty=True)
    assert found is not None  # just written, in this request's gate
    return json_text(found[0], tag=found[1])


@router.delete(
    "/sources/{name}",
    operation_id="delete_source",
    status_code=204,
    response_class=Response,
    responses={
        **NOT_FOUND,
        409: {"model": wire.LockHeld | wire.Detail},
        422: {"model": wire.Detail, "description": "keep_runs is not true or false."},
    },
)
async def delete_source(
    api: Api,
    name: Name,
    keep_runs: Annotated[
        bool, Query(description="Forget the runs it owns too (they stay, owned by no source).")
    ] = False,
) -> Response:
    """Forget a source: its inventory, status and history (404 when it holds nothing; 409 when it
    is locked, or owns runs and keep_runs is not given). Its name may be used again afterwards."""
    outcome, held = api.engine.store.delete_source(api.source_key(name), keep_runs, api.clock.now())
    if outcome == "none":
        raise ApiError(404, wire.Detail(detail=f"no source named {name}"))
    if outcome == "locked":
        raise ApiError(409, wire.LockHeld(detail=_locked_words(name, held), lock=_lock(held)))
    if outcome == "runs":
        shown = ", ".join(held[:5]) + (", …" if len(held) > 5 else "")
        runs = f"{len(held)} run{'s' if len(held) != 1 else ''} ({shown})"
        text = f"source {name} owns {runs}: prune them first, or give keep_runs=true"
        raise ApiError(409, wire.Detail(detail=text))
    api.audit("delete", "source", name, {"keep_runs": keep_runs}, source=name)
    return Response(status_code=204)


@router.get(
    "/sources/{name}/runs",
    operation_id="get_source_runs",
    response_model=wire.SourceRuns | wire.SourceDigests,
    responses={200: {"headers": TAG}, **NOT_MODIFIED, **NOT_FOUND, **BAD_VIEW},
)
def get_source_runs(
    api: Api,
    name: Name,
    view: Annotated[
        wire.SourceRunsView | None, Query(description="digest: each entry without its spec (none is read).")
    ] = None,
    run: Annotated[
        list[str] | None, Query(description="Only these runs' entries (a name not kept is simply absent).")
    ] = None,
    if_none_match: IfNoneMatch = None,
) -> Response:
    """A source's inventory, by run: entries with their specs, or (``?view=digest``) digests."""
    unchanged = _unchanged(api, name, if_none_match)
    if unchanged is not None:
        return unchanged
    found = api.engine.store.source_runs_json(
        api.source_key(name), specs=view is not wire.SourceRunsView.DIGEST, runs=run
    )
    if found is None:  # pragma: no cover - removed between the two reads: sources are never removed
        raise ApiError(404, wire.Detail(detail=f"no source named {name}"))
    return json_text(found[0], tag=found[1])


@router.put(
    "/sources/{name}/runs/{run}",
    operation_id="put_source_run",
    response_model=wire.Written,
    responses={200: {"headers": TAG}, **LOCK_HELD, **INVALID},
)
async def put_source_run(
    api: Api, name: Name, run: RunName, entry: wire.InventoryEntryWrite, lock_id: LockId
) -> Response:
    """Set one run's inventory entry, under the apply lock (the server makes its digest)."""
    try:
        rv = api.engine.store.put_source_run(
            api.source_key(name), run, entry.model_dump(), lock_id, api.clock.now()
        )
    except LockMismatch as exc:
        raise _lock_held(exc) from exc
    return _written(api, name, rv)


@router.delete(
    "/sources/{name}/runs/{run}",
    operation_id="delete_source_run",
    response_model=wire.Written,
    responses={200: {"headers": TAG}, **NOT_FOUND, **LOCK_HELD},
)
async def delete_source_run(api: Api, name: Name, run: RunName, lock_id: LockId) -> Response:
    """Remove one run from the inventory, under the apply lock (404 when it is not in it)."""
    try:
        rv = api.engine.store.delete_source_run(api.source_key(name), run, lock_id, api.clock.now())
    except LockMismatch as exc:
        raise _lock_held(exc) from exc
    except NotFound as exc:
        raise ApiError(404, wire.Detail(detail=str(exc))) from exc
    return _written(api, name, rv)


@router.put(
    "/sources/{name}/status",
    operation_id="put_source_status",
    response_model=wire.Written,
    responses={200: {"headers": TAG}, **LOCK_HELD, **INVALID},
)
async def put_source_status(
    api: Api, name: Name, status: wire.SourceStatus, lock_id: LockId, request: Request
) -> Response:
    """Replace the source's reconcile status (no lock needed; held to one it names); its event,
    if it is one to tell, is queued for the alerts (``alerts.notice_status``)."""
    after = status.model_dump(exclude_unset=True)
    before = api.engine.store.source_status(api.source_key(name))
    try:
        rv = api.engine.store.put_source_status(api.source_key(name), after, lock_id, api.clock.now())
    except LockMismatch as exc:
        raise _lock_held(exc) from exc
    api.app.metrics.record_status(api.scope.workspace, name, status.state)
    notice_status(request, api, name, before, after)
    return _written(api, name, rv)


@router.post(
    "/sources/{name}/history",
    operation_id="add_source_history",
    status_code=201,
    response_model=wire.Written,
    responses={201: {"headers": TAG}, **LOCK_HELD, **INVALID},
)
async def add_source_history(api: Api, name: Name, record: wire.ApplyRecord, lock_id: LockId) -> Response:
    """Add one apply record, under the apply lock; the newest are kept."""
    try:
        rv = api.engine.store.add_source_history(
            api.source_key(name), record.model_dump(exclude_unset=True), lock_id, api.clock.now()
        )
    except LockMismatch as exc:
        raise _lock_held(exc) from exc
    said = {
        k: v
        for k, v in (("commit", record.commit), ("summary", record.summary), ("result", record.result))
        if v
    }
    api.audit("apply", "source", name, said, source=name)
    api.app.metrics.record_apply(api.scope.workspace, name, record.result)
    return _written(api, name, rv, 201)


@router.post(
    "/sources/{name}/lock",
    operation_id="lock_source",
    status_code=201,
    response_model=wire.Lock,
    responses={201: {"headers": TAG}, 409: {"model": wire.LockHeld, "headers": TAG}, **INVALID},
)
async def lock_source(
    api: Api, name: Name, wanted: Annotated[wire.LockRequest | None, Body()] = None
) -> Response:
    """Take the source's apply lock (409 with the holder's lock when it is held)."""
    wanted = wanted or wire.LockRequest()
    now = api.clock.now()
    lock = wire.Lock(
        id=wanted.id or str(uuid.uuid4()),
        owner=wanted.owner or "unknown",
        created_at=now,
        **wanted.model_dump(include={"host", "pid", "started"}),
    )
    took, held, tag = api.engine.store.lock_source(api.source_key(name), lock.model_dump(), now)
    if not took:
        raise ApiError(409, wire.LockHeld(detail=_locked_words(name, held), lock=_lock(held)), {"ETag": tag})
    return answer(wire.Lock.model_validate(held), 201, {"ETag": tag})


@router.delete(
    "/sources/{name}/lock",
    operation_id="unlock_source",
    status_code=204,
    response_class=Response,
    responses={204: {"headers": TAG}, **NOT_FOUND, **LOCK_HELD},
)
async def unlock_source(
    api: Api,
    name: Name,
    id: Annotated[
        str | None, Query(description="The lock's id (left out: release whatever is held).")
    ] = None,
) -> Response:
    """Release the source's lock (404 when none is held; 409 when another id holds it)."""
    outcome, held, tag = api.engine.store.unlock_source(api.source_key(name), id)
    if outcome == "none":
        raise ApiError(404, wire.Detail(detail=f"source {name} is not locked"))
    if outcome == "other":
        raise ApiError(409, wire.LockHeld(detail=_locked_words(name, held or {}), lock=_lock(held)))
    return Response(status_code=204, headers={"ETag": tag} if tag else None)


# ---- the webhook ---------------------------------------------------------------------------------


@dataclass
class _Hook:
    secret: bytes | None = None
    count: int = 0


def _hooks(request: Request) -> dict[str, _Hook]:
    """The sources' webhooks, in the server's memory (kept on the app's state), by the key of
    the source in its workspace (``Scoped.source_key``: one workspace cannot set another's)."""
    state = request.app.state
    held: dict[str, _Hook] | None = getattr(state, "source_hooks", None)
    if held is None:
        held = {}
        state.source_hooks = held
    return held


def _key(request: Request, name: str) -> str:
    return request.state.scoped.source_key(name)


def _hook_state(name: str, hook: _Hook) -> wire.HookState:
    return wire.HookState(name=name, count=hook.count, secret_set=hook.secret is not None)


@router.put("/sources/{name}/hook", operation_id="set_source_hook", status_code=204, responses=INVALID)
async def set_source_hook(name: Name, body: wire.HookSecret, request: Request) -> Response:
    """Set the secret that signs the source's webhook calls (kept in memory, never answered)."""
    _hooks(request).setdefault(_key(request, name), _Hook()).secret = body.secret.encode()
    return Response(status_code=204)


@router.get("/sources/{name}/hook", operation_id="get_source_hook", response_model=wire.HookState)
async def get_source_hook(name: Name, request: Request) -> Response:
    """How many signed webhook calls the source took since the server started."""
    return answer(_hook_state(name, _hooks(request).get(_key(request, name)) or _Hook()))


@public.post(
    "/sources/{name}/hook",
    operation_id="call_source_hook",
    status_code=202,
    response_model=wire.HookState,
    responses={
        401: {"model": wire.Detail, "description": "No secret set, no signature, or a wrong one."},
        409: {"model": wire.Detail, "description": "The source is suspended: the call is not counted."},
    },
    openapi_extra={
        "parameters": [
            {"name": SIGNATURE, "in": "header", "required": False, "schema": {"type": "string"}},
            {"name": GITLAB_TOKEN, "in": "header", "required": False, "schema": {"type": "string"}},
        ],
        "requestBody": {"content": {"application/json": {"schema": {}}}, "required": False},
    },
)
async def call_source_hook(name: Name, request: Request) -> Response:
    """A push: the source's next pass starts at once (see the module docstring)."""
    hook = _hooks(request).get(_key(request, name))
    body = await request.body()
    signature = request.headers.get(SIGNATURE)
    token = request.headers.get(GITLAB_TOKEN)
    secret = hook.secret if hook is not None else None
    good = False
    if secret is not None and signature is not None:
        wanted = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
        good = hmac.compare_digest(signature.strip().encode(), wanted.encode())
    elif secret is not None and token is not None:
        good = hmac.compare_digest(token.encode(), secret)
    if hook is None or not good:  # one answer, whatever is missing: nothing to learn from it
        raise ApiError(401, wire.Detail(detail=unsigned(name)))
    scoped = request.state.scoped
    if scoped.engine.store.source_suspension(scoped.source_key(name)) is not None:
        resume = f"'astra source resume {name}'"
        words = f"source {name} is suspended: the call is ignored (no pass runs until {resume})"
        raise ApiError(409, wire.Detail(detail=words))
    hook.count += 1
    return answer(_hook_state(name, hook), 202)
