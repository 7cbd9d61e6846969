"""Each source's memory: the inventory of runs it applied, their last-applied specs, its apply
lock, its reconcile status and its apply history.

Ownership lives here and nowhere else (never in labels a copy can carry): a run belongs to a
source exactly when it is in that source's inventory, and prune deletes only such runs.

Where it is kept (``open_store``):

* with the cluster, when the cluster keeps sources (``cluster.source_store()``: the control
  plane's ``/sources`` through ``reconciler.clusters.http.ApiSourceStore``; the fake cluster
  in memory), so that a CI runner and a laptop share one inventory and one lock;
* otherwise in a sqlmodel database, ``--state URL`` (``SqlSourceStore``); by default SQLite
  at ``state.db`` in astra's home (``reconciler.home``). An explicit ``--state`` wins.

A source's name (``default_source_name``): ``--source NAME``, else the git remote URL and the
folder's path in the repo (``https://github.com/acme/runs.git//examples``), else the folder's
absolute path.

The JSON shapes (the control plane's ``/sources`` API, CONTRACT §5, speaks exactly these; the
control plane keeps a source as its own row and one row per run of its inventory)::

    GET /sources/{name}  → 200, ETag "RV-LOCKID" (404: the source has no state yet, read as empty;
                           If-None-Match: the tag → 304: unchanged since)
      {"name": "…", "resource_version": 7,
       "inventory": {"RUN": ENTRY},
       "lock": null | {"id": "…", "owner": "user@host:pid", "created_at": 1700000000.0},
       "status": {"state": "Ready" | "Reconciling" | "Stalled", "reason": "ReconciliationSucceeded",
                  "message": "…", "step": "apply", "revision": "sha256…",
                  "observed_revision": "sha256…" | null, "updated_at": 1700000000.0},
       "history": [{"who": "user@host:pid", "when": 1700000000.0, "commit": "abc123…" | null,
                    "summary": {"create": 1, "update": 0, "replace": 0, "delete": 0, "noop": 3},
                    "result": "applied" | "failed: …"}]}      (oldest first, at most 100 kept)
      ENTRY = {"spec": {metadata, spec: normalised}, "applied_at": 1700000000.0,
               "file": "examples/sweep.yaml" | null,
               "digest": "n1:…"}  (answers only: the server's digest of the normalised spec,
                                   reconciler.runspec.normalize; computed here when missing)
    GET /sources         → 200 {"items": [the same objects, one per source, sorted by name]}
    GET /sources/{name}/runs     → 200 {"name", "resource_version", "items": {"RUN": ENTRY}}
                         ?view=digest: each ENTRY without "spec"; ?run=A&run=B: only those runs
                         (a server that ignores either answers more: the client filters)
    PUT /sources/{name}/runs/{run}   body ENTRY, X-Astra-Lock: LOCK_ID → 200 {"name", "resource_version"}
    DELETE /sources/{name}/runs/{run}  X-Astra-Lock: LOCK_ID → 200 {…} | 404 not in the inventory
    PUT /sources/{name}/status   body the status → 200 {"name", "resource_version"}
    POST /sources/{name}/history body one apply record, X-Astra-Lock: LOCK_ID → 201 {…}
                         (the inventory and history writes: 409 {"detail", "lock": the holder's or
                         null} unless LOCK_ID is the lock held; each write adds one to
                         resource_version, and answers with the source's new ETag)
    PUT /sources/{name}  body {"resource_version": 7, "inventory": …, "status": …, "history": …}
                         → 200 the new object (resource_version 8); 409 when 7 is stale
                           (0 creates the source). The lock is not part of a PUT. (The whole
                           state at once: astra itself writes granularly.)
    POST /sources/{name}/lock    body {"id": "…", "owner": "…", "created_at": …}
                         → 201 the lock taken; 409 {"detail": "…", "lock": the holder's lock}
    DELETE /sources/{name}/lock?id=ID
                         → 200/204 released; 409 {"detail", "lock"}: held under another id;
                           404: no lock held

The parts: ``types`` (the data, the ``SourceStore`` protocol, the errors), ``memory``
(``MemorySourceStore``), ``sql`` (``SqlSourceStore``, its tables; loaded when first asked for, so
that a plan whose cluster keeps its sources never imports SQLAlchemy), ``migrations`` (the SQL
database's alembic revisions), ``naming`` (``open_store``, the source's name, the commit, who).

The exceptions (``StateError`` and the tree under it) are drawn in ``types``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..home import astra_home
from ..runspec.vocabulary import HISTORY_KEEP
from .memory import MemorySourceStore
from .naming import default_source_name, default_state_url, git_commit, open_store, owner
from .types import (
    HistoryEntry,
    InventoryEntry,
    KeepsSources,
    Lock,
    Locked,
    SourceState,
    SourceStore,
    StaleState,
    StateError,
    StateTooNew,
)

if TYPE_CHECKING:
    from .sql import SqlSourceStore

__all__ = [
    "HISTORY_KEEP",
    "HistoryEntry",
    "InventoryEntry",
    "KeepsSources",
    "Lock",
    "Locked",
    "MemorySourceStore",
    "SourceState",
    "SourceStore",
    "SqlSourceStore",
    "StaleState",
    "StateError",
    "StateTooNew",
    "astra_home",
    "default_source_name",
    "default_state_url",
    "git_commit",
    "open_store",
    "owner",
]


def __getattr__(name: str) -> Any:
    """``SqlSourceStore``, imported when first asked for (it brings SQLAlchemy and sqlmodel)."""
    if name == "SqlSourceStore":
        from .sql import SqlSourceStore

        return SqlSourceStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
