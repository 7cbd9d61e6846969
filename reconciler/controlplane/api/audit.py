"""The audit trail (``GET /events``): every write of a workspace, who made it, when, and what changed.

Owns the route that reads a workspace's trail (``?run=NAME``: one run's; ``?since=T``: from a
time on; ``?limit=N``: the newest N), and ``changes``, what an update changed, as the trail
keeps it. The writes themselves are recorded where they are made (``Scoped.audit``: runs
created, updated, deleted; a source's apply, its whole state written, its deletion; tokens made
and revoked; quotas set; workspaces made), in the same call, after the write succeeded.

The trail is bounded: a workspace keeps its newest ``ApiContext.audit_keep`` events (``astra
server --audit-keep N``). A run's own decisions and observations (placed, started, exited) are
not writes: they are the run's events (``GET /runs/{name}/events``).

Must not touch: SQL (the store's), what a role may do (``ApiRoute`` checked it: a read).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import Response

from ...runspec.vocabulary import changed_paths
from ...wire import models, teams
from .context import Api, ApiRoute, answer

__all__ = ["VALUE_MAX", "changes", "router"]

router = APIRouter(tags=["audit"], route_class=ApiRoute)

#: The longest value (as JSON text) an event keeps of a field that changed; longer: its length.
VALUE_MAX = 200
#: The most events one answer holds.
PAGE_MAX = 10_000


def _kept(value: Any) -> Any:
    text = json.dumps(value, sort_keys=True)
    return value if len(text) <= VALUE_MAX else f"({len(text)} characters)"


def changes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What changed from one run document to the next: ``{PATH: {"from": old, "to": new}}``, each
    value as it was (or, past ``VALUE_MAX`` characters, its length); a field added or removed has
    ``null`` on the other side."""
    out: dict[str, dict[str, Any]] = {}
    for path in changed_paths(before, after):
        old: Any = before
        new: Any = after
        for step in path.steps:
            old = old.get(step) if isinstance(old, dict) else None
            new = new.get(step) if isinstance(new, dict) else None
        out[str(path)] = {"from": _kept(old), "to": _kept(new)}
    return out


@router.get(
    "/events",
    operation_id="list_audit_events",
    response_model=teams.AuditEventList,
    responses={422: {"model": models.Detail, "description": "A since or limit that is not a number."}},
)
def list_events(
    api: Api,
    run: Annotated[str | None, Query(description="Only the events of this run.")] = None,
    since: Annotated[
        float | None, Query(description="Only events at this time (seconds since the epoch) or later.")
    ] = None,
    limit: Annotated[
        int | None, Query(ge=1, le=PAGE_MAX, description=f"Only the newest this many (1 to {PAGE_MAX}).")
    ] = None,
) -> Response:
    """The workspace's audit trail, oldest first: every write, who made it, when, what changed."""
    rows = api.engine.store.audit_rows(
        api.scope.org,
        api.scope.workspace,
        kind="run" if run is not None else None,
        name=run,
        since=since,
        limit=limit,
    )
    return answer(teams.AuditEventList(items=[teams.AuditEvent.model_validate(r) for r in rows]))
