"""Where runs would start if submitted now: ``POST /runs:placement`` (= ``/jobs:placement``).

Its shapes are ``wire.placement``.

Owns the dry run's route. Each document is checked exactly as ``POST /runs`` checks one
(``runs.checked``: the same 422 words, in its item); the valid ones are handed together to the
scheduler's ``outlook``, which runs the real scheduler on a COPY of the engine's state at the
server's ``now`` (a run of the same name is replaced in the copy, as an apply's replace would).
Nothing is created, queued, recorded or audited, and the scheduler is not woken. More than
``BATCH_MAX`` documents, or a body that is no list of documents, is 422 whole.

The work is done in a worker thread, holding the engine's gate as every route does. Must not
touch: SQL, scheduling rules, processes, the engine's state.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError

from ...runspec.models import RULES_CHECKED, Run
from ...wire import BATCH_MAX, PLACEMENT_PATH
from ...wire import models as wire
from ...wire import placement as wire_placement
from ..runnable import unrunnable
from ..scheduler.outlook import Outlook, outlook
from .batch import TOO_MANY
from .context import Api, ApiError, ApiRoute, Scoped, answer, problem, problems_of, read_json
from .runs import checked, under_both

__all__ = ["router"]

router = APIRouter(tags=["runs"], route_class=ApiRoute)


def _envelope(body: Any) -> wire_placement.RunPlacement:
    try:
        asked = wire_placement.RunPlacement.model_validate(body)
    except ValidationError as exc:
        raise ApiError(422, problems_of([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()])) from None
    if len(asked.runs) > BATCH_MAX:
        raise problem("runs", TOO_MANY.format(limit=BATCH_MAX, n=len(asked.runs)))
    return asked


def _body_schema() -> dict[str, Any]:
    """``RunPlacement``'s schema with the limit on ``runs``; each run is any JSON value here (a
    document that is not a run is its item's 422)."""
    schema = wire_placement.RunPlacement.model_json_schema()
    schema["properties"]["runs"] = {**schema["properties"]["runs"], "items": {}, "maxItems": BATCH_MAX}
    return schema


def _name(doc: Any) -> str | None:
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else None


def _place(api: Scoped, asked: wire_placement.RunPlacement) -> wire_placement.RunPlacementResult:
    """Check every document; the scheduler's outlook for those that pass, as one submission."""
    items: list[wire_placement.RunPlacementItem] = []
    valid: dict[str, tuple[int, Run]] = {}  # by key: a name given twice is placed once, the last
    for i, doc in enumerate(asked.runs):
        try:
            checked(doc)
        except ApiError as exc:
            assert isinstance(exc.body, wire.Problems)
            items.append(
                wire_placement.RunPlacementItem(
                    name=_name(doc), status=422, outlook=None, errors=exc.body.root
                )
            )
            continue
        valid[api.key(doc["metadata"]["name"])] = (i, Run.model_validate(doc, context=RULES_CHECKED))
        items.append(wire_placement.RunPlacementItem(name=_name(doc), status=200, outlook=None, errors=None))
    order = list(valid.items())
    seen = outlook(api.engine.state, [(key, run) for key, (_, run) in order], api.clock.now())
    by_key = {key: o for (key, _), o in zip(order, seen, strict=True)}
    for key, (_, run) in order:  # what this executor could never start fails, in its words
        never = unrunnable(api.engine.executor, run)
        if never is not None:
            by_key[key] = Outlook("fail", never[1])
    for i, doc in enumerate(asked.runs):
        if items[i].status == 200:
            o = by_key[api.key(doc["metadata"]["name"])]
            items[i] = items[i].model_copy(
                update={"outlook": wire_placement.RunOutlook(kind=o.kind, words=o.words)}
            )
    return wire_placement.RunPlacementResult(items=items)


async def place_runs(request: Request, api: Api) -> Response:
    """Where each run would start if submitted now, or why it would wait: nothing changes."""
    asked = _envelope(await read_json(request))
    return answer(await asyncio.to_thread(_place, api, asked))


under_both(
    router,
    PLACEMENT_PATH.removeprefix("/runs"),
    place_runs,
    method="POST",
    operation="place_{word}s",
    response_model=wire_placement.RunPlacementResult,
    responses={
        422: {"model": wire.Problems, "description": "Not a list of runs, or more than a batch holds."}
    },
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": _body_schema()}}}
    },
)
