"""Runs (``/runs`` = ``/jobs``): create, list, read, update, cancel and delete; a run's events.

Owns the runs' routes. Each one composes: read the body (a run document, checked by the spec
layer's ``validate_data``, whose messages are the 422's), call the ``Engine``, answer a ``wire``
model. The shapes are ``reconciler.wire.models``'s; the listing's texts are ``ResponseCache``'s.
Must not touch: scheduling rules, SQL, processes.

``resource_version``: a PUT names the one it read (``metadata.resource_version``; left out:
unconditional) and is refused (409) when the run changed since. A PUT may change only what a run
takes in place (``reconciler.runspec.vocabulary.validate_update``): any other change is a 422
naming each field.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import Response

from ...runspec.errors import InvalidSpec
from ...runspec.rerun import RERUN_OF
from ...runspec.validate import validate_data
from ...wire import briefs
from ...wire import models as wire
from ..scopes import shown
from ..store import NameExists, NotFound, Stale
from .audit import changes
from .body import OFF_LOOP_BYTES
from .context import Api, ApiError, ApiRoute, answer, json_text, read_json
from .views import run_view

__all__ = ["router"]

router = APIRouter(tags=["runs"], route_class=ApiRoute)

#: A run is a job (``/jobs``, also ``/runs``): each route is served, and documented, under both.
RUNS = (("run", "/runs"), ("job", "/jobs"))

RunName = Annotated[str, Path(description="The run's name.")]


async def run_document(request: Request) -> Any:
    """The body of POST and PUT, read strictly (``read_json``); ``checked`` validates it."""
    return await read_json(request)


#: The body of POST and PUT, as a route's parameter.
RunBody = Annotated[Any, Depends(run_document)]

#: The request body of POST and PUT: a run document (``wire.RunDocument``). It is read as JSON
#: and checked by ``validate_data``, not by pydantic, so the 422's words are the spec layer's.
RUN_DOCUMENT = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RunDocument"}}},
    }
}


def problems(errors: Any) -> wire.Problems:
    return wire.Problems([wire.Problem(path=str(e.path), message=e.message) for e in errors])


def checked(doc: Any) -> dict[str, Any]:
    """``doc`` when it is a valid run document; else 422 with every problem ``validate_data`` finds."""
    errors = validate_data(doc)
    found = problems(errors).root if errors else []  # a valid document makes no model: a batch checks 1,000
    if isinstance(doc, dict) and "template" in doc and not found:
        found.append(
            wire.Problem(
                path="template",
                message="the cluster takes final run specs: render the template first "
                "(astra template render, or astra apply)",
            )
        )
    if found:
        raise ApiError(422, wire.Problems(found))
    return doc


def written(run: wire.Run, doc: dict[str, Any]) -> wire.RunWritten:
    """``run`` as a write answers it: with its document's warnings (``reconciler.runspec.lint``)."""
    from ...runspec.lint import lint

    found = [wire.Problem(path=str(w.path), message=w.message) for w in lint(doc)]
    return wire.RunWritten.model_validate({**run.model_dump(exclude_unset=True), "warnings": found})


async def valid(request: Request, body: Any) -> dict[str, Any]:
    """``checked(body)``: on the event loop for a small body, in a worker thread for a large one
    (validating a document of 1 MiB takes longer than a loop may be held)."""
    if len(await request.body()) < OFF_LOOP_BYTES:
        return checked(body)
    return await asyncio.to_thread(checked, body)


def the_run(api: Api, name: str) -> str:
    """The key of the scope's run ``name``; 404 when it has none."""
    key = api.key(name)
    if key not in api.engine.state.runs:
        raise ApiError(404, wire.Detail(detail=f"no run named {name}"))
    return key


def view(api: Api, request: Request, key: str) -> wire.Run:
    return run_view(api.engine, key, api.runs_url(request), api.scope.workspace)


def _source_of(doc: dict[str, Any]) -> str | None:
    """The source that applied a run document (``astra apply`` names it in an annotation)."""
    found = (doc.get("metadata", {}).get("annotations") or {}).get("astra.source")
    return found if isinstance(found, str) else None


async def create_run(request: Request, api: Api, body: RunBody) -> Response:
    """Create a run from a run document: 201 and the run, ``Location`` its URL."""
    doc = await valid(request, body)  # a drive it names that does not exist yet: it waits (needs)
    name = doc["metadata"]["name"]
    event = api.audit_events([("create", "run", name, {"spec": doc["spec"]}, _source_of(doc))])
    try:  # the run and its audit event: one transaction (a full disk keeps neither)
        record = api.engine.submit(doc, api.clock.now(), api.scope, event)
    except NameExists as exc:
        raise ApiError(409, wire.Detail(detail=str(exc))) from exc
    api.on_change()
    api.cache.digest(record.name)  # made with the document, not by the first plan that lists 10,000 runs
    run = view(api, request, record.name)
    return answer(written(run, doc), 201, {"Location": run.status.url})


#: ``GET /runs``'s filters, each of any view: the runs that wait for a run, the reruns of one
DependsOn = Annotated[str | None, Query(description="Only the runs whose spec.depends_on names this run.")]
RerunOf = Annotated[
    str | None,
    Query(description="Only the reruns of this run (astra rerun --failed: annotation astra.rerun-of)."),
]


def list_runs(
    request: Request,
    api: Api,
    view_: Annotated[
        wire.RunView | None,
        Query(
            alias="view",
            description="summary: each run's summary (no documents); brief: what a listing shows of "
            "each (no spec); full: whole runs.",
        ),
    ] = None,
    depends_on: DependsOn = None,
    rerun_of: RerunOf = None,
) -> Response:
    """Every run, in submission order: whole runs, or (``?view=summary``) their summaries (with
    an ETag; 304 when ``If-None-Match`` names the listing's tag now), or (``?view=brief``) what a
    listing shows of each; ``?depends_on=`` and ``?rerun_of=`` keep only the runs related so."""
    keys = None if depends_on is None and rerun_of is None else _related(api, depends_on, rerun_of)
    if view_ is wire.RunView.BRIEF:
        return json_text(api.cache.briefs(keys))
    if view_ is wire.RunView.SUMMARY and keys is not None:
        return json_text('{"items":[' + ",".join(api.cache.summary_text(k) for k in keys) + "]}")
    if view_ is wire.RunView.SUMMARY:
        tag = api.cache.summary_tag()
        if tag in {t.strip() for t in request.headers.get("if-none-match", "").split(",")}:
            return Response(status_code=304, headers={"ETag": tag})
        text, tag = api.cache.tagged_summaries()
        return json_text(text, tag=tag)
    return json_text(api.cache.runs(api.runs_url(request), api.scope.workspace, keys))


def _related(api: Api, depends_on: str | None, rerun_of: str | None) -> list[str]:
    """The keys of the scope's runs, in submission order, whose ``spec.depends_on`` names
    ``depends_on`` and (both given) that rerun ``rerun_of``; ``None`` of either: any."""
    meta = api.engine.meta
    chosen = []
    for key in api.engine.runs_of(api.scope):
        doc = meta[key].document
        if depends_on is not None and not any(
            isinstance(d, dict) and d.get("run") == depends_on for d in doc["spec"].get("depends_on") or ()
        ):
            continue
        notes = doc["metadata"].get("annotations") or {}
        if rerun_of is not None and notes.get(RERUN_OF) != rerun_of:
            continue
        chosen.append(key)
    return chosen


def get_run(request: Request, api: Api, name: RunName) -> Response:
    """One run."""
    return answer(view(api, request, the_run(api, name)))


async def update_run(request: Request, api: Api, name: RunName, body: RunBody) -> Response:
    """Update a run in place with a run document naming the ``resource_version`` it read."""
    key = the_run(api, name)
    doc = await valid(request, body)
    if doc["metadata"].get("name") != name:
        raise ApiError(
            422,
            wire.Problems(
                [wire.Problem(path="metadata.name", message=f"must be {name}, the run this PUT names")]
            ),
        )
    before = api.engine.meta[key].document
    try:
        rv = api.engine.update(key, doc, doc["metadata"].get("resource_version"), api.clock.now())
    except InvalidSpec as exc:
        raise ApiError(422, problems(exc.errors)) from exc
    except Stale as exc:
        raise ApiError(409, wire.StaleDetail(detail=str(exc), resource_version=exc.current)) from exc
    except NotFound as exc:
        raise ApiError(404, wire.Detail(detail=str(exc))) from exc
    api.on_change()
    api.cache.digest(key)
    changed = changes(before, api.engine.meta[key].document)
    api.audit("update", "run", name, {"resource_version": rv, "changed": changed}, source=_source_of(doc))
    return answer(written(view(api, request, key), doc))


def delete_run(request: Request, api: Api, name: RunName) -> Response:
    """Cancel a run (its processes are stopped now) and delete it: the run as it ended."""
    key = the_run(api, name)
    now = api.clock.now()
    api.engine.cancel(key, now)
    body = view(api, request, key)
    source = _source_of(api.engine.meta[key].document)
    event = api.audit_events([("delete", "run", name, {"state": str(body.status.state)}, source)])
    api.engine.delete(key, now, event)  # the deletion and its audit event: one transaction
    api.on_change()
    return answer(body)


def run_events(
    api: Api,
    name: RunName,
    tail: Annotated[
        int | None, Query(ge=1, description="Only the last this many events, and how many there are.")
    ] = None,
) -> Response:
    """Every decision and observation about the run, in order (``?tail=N``: the last N, with
    the run's ``total``)."""
    key = the_run(api, name)
    rows = api.engine.store.event_rows(key, last=tail)
    items = [
        wire.Event.model_validate({**e, "run": name, "worker": e["worker"] and shown(e["worker"])})
        for e in rows
    ]
    if tail is not None:
        return answer(wire.EventTail(items=items, total=api.engine.store.event_count(key)))
    return answer(wire.EventList(items=items))


def _errors(*statuses: int, conflict: type[wire.Detail] = wire.Detail) -> dict[int | str, Any]:
    models: dict[int, Any] = {404: wire.Detail, 409: conflict, 422: wire.Problems}
    return {s: {"model": models[s]} for s in statuses}


def under_both(
    router: APIRouter, path: str, endpoint: Any, *, method: str, operation: str, **kw: Any
) -> None:
    """Serve ``endpoint`` at ``/runs{path}`` and at ``/jobs{path}`` (a run is a job), documented
    under both: its ``operation`` id with ``{word}`` as ``run`` or ``job``."""
    for word, runs in RUNS:
        op = operation.format(word=word)
        router.add_api_route(runs + path, endpoint, methods=[method], operation_id=op, **kw)


under_both(
    router,
    "",
    create_run,
    method="POST",
    operation="create_{word}",
    status_code=201,
    response_model=wire.RunWritten,
    responses={
        201: {"headers": {"Location": {"description": "The run's URL.", "schema": {"type": "string"}}}},
        **_errors(409, 422),
    },
    openapi_extra=RUN_DOCUMENT,
)
under_both(
    router,
    "",
    list_runs,
    method="GET",
    operation="list_{word}s",
    response_model=wire.RunList | wire.RunSummaryList | briefs.RunBriefList,
    responses={422: {"model": wire.Detail, "description": "An unknown view."}},
)
under_both(
    router,
    "/{name}",
    get_run,
    method="GET",
    operation="get_{word}",
    response_model=wire.Run,
    responses=_errors(404),
)
under_both(
    router,
    "/{name}",
    update_run,
    method="PUT",
    operation="update_{word}",
    response_model=wire.RunWritten,
    responses=_errors(404, 409, 422, conflict=wire.StaleDetail),
    openapi_extra=RUN_DOCUMENT,
)
under_both(
    router,
    "/{name}",
    delete_run,
    method="DELETE",
    operation="delete_{word}",
    response_model=wire.Run,
    responses=_errors(404),
)
under_both(
    router,
    "/{name}/events",
    run_events,
    method="GET",
    operation="list_{word}_events",
    response_model=wire.EventList | wire.EventTail,
    responses={**_errors(404), 422: {"model": wire.Detail, "description": "A tail below 1, or no number."}},
)
