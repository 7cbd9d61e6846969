"""Many runs created in one request: ``POST /runs:batch`` (= ``/jobs:batch``), shapes ``wire.batch``.

Owns the batch's route. Each document is checked exactly as ``POST /runs`` checks one
(``runs.checked``: ``validate_data``, the same 422 words; a drive it mounts that the workspace
does not have yet makes it wait, not a 422: ``controlplane.needs``), a name taken (by
a run, or by an earlier document of the batch) is the same 409; the documents that pass (each
made a ``Run`` once, handed to the engine, and digested once: its ``spec_digest`` is both its
listing's and its inventory entry's digest, ``normalize`` dropping astra's annotations) are
created by ``Engine.submit_batch`` in ONE transaction, with their audit events (one a run, as
``POST /runs`` writes it: a server killed after the commit leaves no run without its event) and,
when the batch says ``record``, their entries in the source's inventory (under the source's
apply lock: ``X-Astra-Lock``, else 409 ``LockHeld`` and nothing created), and the scheduler is
woken once. The answer has one item per document, in order (``wire.batch.RunBatchResult``), with
the source's ETag after it when it records them (as every source write answers it). A batch of
more than ``BATCH_MAX`` documents is refused whole (422, in words), and so is a body that is no
batch; the body's own limits (``body``: 16 MiB, 64 levels, a key twice) hold as for every route.

The work is done in a worker thread, the body's reading too (a batch of 1,000 documents is read,
checked and created in about 0.2 s), with the cyclic collector paused (``_paused``), holding the
engine's gate as every route does. Must not touch: SQL, scheduling rules, processes.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError

from ...collector import gc_paused
from ...runspec.models import RULES_CHECKED, Run
from ...runspec.normalize import spec_digest, without_own
from ...wire import BATCH_MAX, BATCH_PATH
from ...wire import batch as wire_batch
from ...wire import models as wire
from ..store import BatchRecord, LockMismatch, NameExists
from .body import strict_json
from .context import Api, ApiError, ApiRoute, Scoped, answer, problem, problems_of
from .runs import _source_of, checked, under_both
from .sources import LOCK_HELD, TAG, LockId

__all__ = ["TOO_MANY", "router"]

router = APIRouter(tags=["runs"], route_class=ApiRoute)

TOO_MANY = "a batch holds at most {limit} runs; this one holds {n}: send them in batches of at most {limit}"
NOT_ATTEMPTED = "not attempted: document {at} of the batch was not created (stop_on_error)"


def _body_schema() -> dict[str, Any]:
    """``RunBatch``'s schema, whole (its definitions inlined), with the limit on ``runs``. Each run
    is any JSON value here: a document that is not a run is its item's 422, not the batch's."""
    schema = wire_batch.RunBatch.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return inline(defs[ref.removeprefix("#/$defs/")])
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    out = inline(schema)
    out["properties"]["runs"] = {**out["properties"]["runs"], "items": {}, "maxItems": BATCH_MAX}
    return out


def _envelope(body: Any) -> wire_batch.RunBatch:
    """The batch, its own fields held to the API's rules (a document's are ``checked``'s)."""
    try:
        batch = wire_batch.RunBatch.model_validate(body)
    except ValidationError as exc:
        raise ApiError(422, problems_of([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()])) from None
    if batch.record is not None:  # its texts and numbers: as every other body's (body.strict_json)
        strict_json(json.dumps({"record": body["record"]}).encode(), values=True)
    if len(batch.runs) > BATCH_MAX:
        raise problem("runs", TOO_MANY.format(limit=BATCH_MAX, n=len(batch.runs)))
    return batch


def _item(doc: Any, status: int, **given: Any) -> wire_batch.RunBatchItem:
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    fields = {"resource_version": None, "detail": None, "errors": None, **given}
    return wire_batch.RunBatchItem(name=name if isinstance(name, str) else None, status=status, **fields)


def _create(api: Scoped, batch: wire_batch.RunBatch, lock_id: str | None) -> wire_batch.RunBatchResult:
    """Check every document, create those that pass in one transaction: the answer.

    Over 60 lines: the checks of every document, then the one transaction that records those that pass;
    split, the transaction's bounds would be passed around."""
    engine = api.engine
    items: list[wire_batch.RunBatchItem | None] = [None] * len(batch.runs)
    accepted: list[tuple[int, dict[str, Any]]] = []
    taken: set[str] = set()
    stopped: int | None = None
    models: list[Run] = []
    for i, doc in enumerate(batch.runs):
        if stopped is not None:
            items[i] = _item(doc, 424, detail=NOT_ATTEMPTED.format(at=stopped))
            continue
        try:
            checked(doc)
        except ApiError as exc:
            assert isinstance(exc.body, wire.Problems)
            items[i] = _item(doc, 422, errors=exc.body.root)
        else:
            run = Run.model_validate(doc, context=RULES_CHECKED)
            name = doc["metadata"]["name"]
            if api.key(name) in engine.state.runs or name in taken:
                items[i] = _item(doc, 409, detail=f"a run named {name} exists")
            else:
                taken.add(name)
                accepted.append((i, doc))
                models.append(run)
                continue
        if batch.stop_on_error:
            stopped = i
    digests = [spec_digest(d) for _, d in accepted]  # each run's, once: its listing's and its entry's
    record = None
    if batch.record is not None:
        given = batch.record
        entries = {
            d["metadata"]["name"]: {
                "spec": without_own(_without_version(d)),
                "applied_at": given.applied_at,
                "file": given.files.get(d["metadata"]["name"]),
            }
            for _, d in accepted
        }
        # normalize drops astra's annotations and the resource_version: each entry's digest is its run's
        made = {d["metadata"]["name"]: h for (_, d), h in zip(accepted, digests, strict=True)}
        record = BatchRecord(api.source_key(given.source), lock_id, entries, made)
    audit = api.audit_events(  # the audit trail: one event per run, as POST /runs writes it
        [
            (
                "create",
                "run",
                doc["metadata"]["name"],
                {"spec": doc["spec"]},
                batch.record.source if batch.record is not None else _source_of(doc),
            )
            for _, doc in accepted
        ]
    )
    try:
        versions = engine.submit_batch(
            [d for _, d in accepted], api.clock.now(), record, api.scope, models, audit
        )
    except LockMismatch as exc:
        raise ApiError(409, wire.LockHeld(detail=str(exc), lock=_lock(exc.lock))) from exc
    except NameExists as exc:
        raise ApiError(409, wire.Detail(detail=str(exc))) from exc
    for (i, doc), rv, h in zip(accepted, versions, digests, strict=True):
        items[i] = _item(doc, 201, resource_version=rv)
        api.cache.digested(api.key(doc["metadata"]["name"]), h)  # as POST /runs makes it with the document
    done = [item for item in items if item is not None]
    return wire_batch.RunBatchResult(created=len(accepted), items=done)


def _paused(
    api: Scoped, raw: bytes, lock_id: str | None
) -> tuple[wire_batch.RunBatch, wire_batch.RunBatchResult]:
    """The body read (``strict_json``, as ``read_json`` reads it), held to the batch's rules and
    created (``_create``), with the cyclic collector paused (``gc_paused``): a batch makes many
    small trees and no cycles; the collector would walk them again and again as they are read
    (twice the time orjson takes to read them) and validated (pydantic, three times slower). The
    runs created live as long as the server holds them: frozen as the batch ends (``keeping``),
    the collector's full passes do not walk them again, nor the runs of every batch before."""
    with gc_paused(keeping=True):
        batch = _envelope(strict_json(raw, values=False))
        return batch, _create(api, batch, lock_id)


def _lock(held: dict[str, Any] | None) -> wire.Lock | None:
    return None if held is None else wire.Lock.model_validate(held)


def _without_version(doc: dict[str, Any]) -> dict[str, Any]:
    """The document as its inventory entry keeps it: without the server's ``resource_version``."""
    meta = {k: v for k, v in doc["metadata"].items() if k != "resource_version"}
    return {**doc, "metadata": meta}


async def create_runs(request: Request, api: Api, lock_id: LockId) -> Response:
    """Create many runs at once: one result per document, as ``POST /runs`` of it would answer."""
    batch, result = await asyncio.to_thread(_paused, api, await request.body(), lock_id)
    if result.created:
        api.on_change()
    tag = api.engine.store.source_tag(api.source_key(batch.record.source)) if batch.record else None
    return answer(result, headers={"ETag": tag} if tag else None)


under_both(
    router,
    BATCH_PATH.removeprefix("/runs"),
    create_runs,
    method="POST",
    operation="create_{word}s_batch",
    response_model=wire_batch.RunBatchResult,
    responses={
        200: {"headers": TAG},
        **LOCK_HELD,
        422: {"model": wire.Problems, "description": "Not a batch, or more runs than a batch holds."},
    },
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": _body_schema()}}}
    },
)
