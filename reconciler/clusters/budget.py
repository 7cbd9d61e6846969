"""The client of ``GET /workspaces/{name}/budget``: the GPU-hour budget of the workspace a plan
creates runs in, for the plan's cost line (``plan.cost.describe_spend``).

Owns ``budget_of``: the workspace the API's path names (``GET /info``), then its budget, read
without pydantic: ``{"workspace", "gpu_hours", "per", "left_gpu_hours"}``, or ``None`` when the
workspace has none, or the cluster does not say (another Astraeus API, a token that may not read
it, an answer of another shape). A plan's words are a courtesy: every ``ClusterError`` is said at
debug level and becomes ``None``. Must not touch: the plan, the documents.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from .base import ClusterError

if TYPE_CHECKING:
    from .http import HttpCluster

__all__ = ["budget_of"]

log = logging.getLogger(__name__)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def budget_of(cluster: HttpCluster) -> dict[str, Any] | None:
    """The budget of the workspace the cluster's path names, or ``None`` (see the module docstring)."""
    try:
        workspace = cluster.request("GET", "/info").json()["workspace"]
        path = f"/workspaces/{quote(str(workspace), safe='')}/budget"
        data = cluster.request("GET", path).json()
    except (ClusterError, ValueError, KeyError, TypeError) as exc:
        log.debug("no budget from %s: %s", cluster.address, exc)
        return None
    if not isinstance(data, dict) or not isinstance(workspace, str):
        return None
    hours, left, per = data.get("gpu_hours"), data.get("left_gpu_hours"), data.get("per")
    if not _number(hours) or not _number(left) or per not in ("month", "week"):
        return None  # no budget (``gpu_hours`` null), or an answer of another shape
    return {"workspace": workspace, "gpu_hours": hours, "per": per, "left_gpu_hours": left}
