"""The client of ``POST /runs:placement``: where runs would start if submitted now (``wire.placement``).

Owns ``placement_of``: the documents sent (at most ``BATCH_MAX``, compact), and each one's
outlook read back without pydantic (as ``http``'s decoders): ``{"kind": "start"|"wait"|"fail",
"words": …}`` by run name. ``None`` when the cluster gives no answer: no such route (another
Astraeus API), a refusal, an error, or an answer of another shape; the caller then shows
nothing. A dry run is a courtesy of the plan: it never fails one, so every ``ClusterError`` is
said at debug level and becomes ``None`` here. Must not touch: the plan, the documents.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from ..wire import BATCH_MAX, PLACEMENT_PATH
from .base import ClusterError

if TYPE_CHECKING:
    from .http import HttpCluster

__all__ = ["KINDS", "placement_of"]

log = logging.getLogger(__name__)

#: What an outlook may say: where it would start, why it would wait, why it could never start.
KINDS = frozenset({"start", "wait", "fail"})


def placement_of(cluster: HttpCluster, documents: list[dict[str, Any]]) -> dict[str, dict[str, str]] | None:
    """Each document's outlook by its run's name (those the cluster answered), or ``None``."""
    docs = documents[:BATCH_MAX]
    body = ('{"runs":[' + ",".join(json.dumps(d, separators=(",", ":")) for d in docs) + "]}").encode()
    try:
        response = cluster.request(
            "POST", PLACEMENT_PATH, content=body, headers={"Content-Type": "application/json"}
        )
        items = response.json()["items"]
    except (ClusterError, ValueError, KeyError, TypeError) as exc:
        log.debug("no placement from %s: %s", cluster.address, exc)
        return None
    if not isinstance(items, list) or len(items) != len(docs):
        log.debug("no placement from %s: not one item for each of %d runs", cluster.address, len(docs))
        return None
    out: dict[str, dict[str, str]] = {}
    for doc, item in zip(docs, items, strict=True):
        o = item.get("outlook") if isinstance(item, dict) else None
        if isinstance(o, dict) and o.get("kind") in KINDS and isinstance(o.get("words"), str):
            out[doc["metadata"]["name"]] = {"kind": o["kind"], "words": o["words"]}
    return out
