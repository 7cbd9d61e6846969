"""The client of ``POST /runs:batch``: many runs created, and recorded in a source, in one call.

Owns ``create_batch``: the documents sent (each serialised once, compact, by orjson:
``wire.text``), as many as fit in ``BODY_BUDGET`` bytes (the server takes at most 16 MiB; those
left out are answered 424, not attempted, as the server answers the documents after a failure
under ``stop_on_error``), and each document's status read back (201 created, 409, 422, 424:
``wire.batch``). ``None``: the server has no batch route (another Astraeus API: 404 or 405), and
the caller goes run by run.

The answer is read without pydantic (as ``http``'s decoders): only each item's ``status``. The
caller redoes a document that was not created on its own (``POST /runs``), which answers the
refusal in the single call's words. Must not touch: the plan, the inventory's meaning (the server
records each run created with its spec less astra's own annotations, as an apply records it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..runspec.normalize import without_own
from ..state import InventoryEntry, SourceState
from ..wire import BATCH_MAX, BATCH_PATH, LOCK_HEADER
from ..wire.text import compact
from .base import ClusterError, NotFound

if TYPE_CHECKING:
    from .http import HttpCluster

__all__ = ["BODY_BUDGET", "NOT_ATTEMPTED", "Batch", "batch_texts", "create_batch"]

#: The most bytes of documents one batch carries (the server's limit for a body is 16 MiB).
BODY_BUDGET = 8 * 1024 * 1024
#: A document's status when it was not attempted (left out of the body, or after a failure).
NOT_ATTEMPTED = 424
_NOT_SERVED = frozenset({404, 405})


@dataclass(frozen=True)
class Batch:
    """What a batch did: each document's status, in order, and the source's tag after it (its
    ``ETag``, when the batch recorded the runs in a source)."""

    statuses: list[int]
    tag: str | None

    def recorded(
        self, state: SourceState, documents: list[dict[str, Any]], files: dict[str, str], applied_at: float
    ) -> SourceState:
        """``state`` (a source as it was before the batch) changed as the server changed it: each
        run created in its inventory (as ``apply`` records one), its version moved once if any."""
        made = [d for d, status in zip(documents, self.statuses, strict=True) if status == 201]
        if made:
            state.resource_version += 1
        for d in made:
            run = d["metadata"]["name"]
            state.inventory[run] = InventoryEntry(without_own(d), applied_at, files.get(run))
        return state


def batch_texts(documents: list[dict[str, Any]]) -> list[bytes]:
    """What ``create_batch`` sends of each document (made ahead by a caller that has the time)."""
    return [compact(_without_version(doc)) for doc in documents[:BATCH_MAX]]


def create_batch(
    cluster: HttpCluster,
    documents: list[dict[str, Any]],
    *,
    record: dict[str, Any] | None = None,
    lock: str | None = None,
    texts: list[bytes] | None = None,
) -> Batch | None:
    """Create ``documents`` in order, stopping at the first that is not created; each one's
    status (see the module docstring), or ``None`` when the server has no batch route.
    ``texts``: ``batch_texts(documents)``, when the caller made them already."""
    made = batch_texts(documents) if texts is None else texts[:BATCH_MAX]
    texts = []
    size = 0
    for text in made:
        if texts and size + len(text) > BODY_BUDGET:
            break
        texts.append(text)
        size += len(text)
    head = '{"stop_on_error":true,' + ("" if record is None else f'"record":{json.dumps(record)},')
    body = (head + '"runs":[').encode() + b",".join(texts) + b"]}"
    headers = {"Content-Type": "application/json", **({LOCK_HEADER: lock} if lock else {})}
    try:
        response = cluster.request("POST", BATCH_PATH, content=body, headers=headers)
    except ClusterError as exc:
        status = getattr(getattr(exc.__cause__, "response", None), "status_code", None)
        if isinstance(exc, NotFound) or status in _NOT_SERVED:
            return None
        raise
    statuses = _statuses(response, len(texts))
    if statuses is None:
        raise ClusterError(f"{cluster.address} answered a batch with something that is not its results")
    return Batch(statuses + [NOT_ATTEMPTED] * (len(documents) - len(texts)), response.headers.get("etag"))


def _statuses(response: Any, n: int) -> list[int] | None:
    """Each item's status, when the answer has one item per document sent."""
    try:
        items = response.json()["items"]
        statuses = [item["status"] for item in items]
    except (ValueError, KeyError, TypeError):
        return None
    if len(statuses) != n or not all(type(s) is int for s in statuses):
        return None
    return statuses


def _without_version(document: dict[str, Any]) -> dict[str, Any]:
    meta = document.get("metadata") or {}
    if "resource_version" not in meta:
        return document
    return {**document, "metadata": {k: v for k, v in meta.items() if k != "resource_version"}}
