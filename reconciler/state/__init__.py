"""Each source's memory: the inventory of runs it applied, their last-applied specs, its apply
lock, its reconcile status and its apply history.

Ownership lives here and nowhere else (never in labels a copy can carry): a run belongs to a
source exactly when it is in that source's inventory, and prune deletes only such runs.

Where it is kept (``open_store``):

* with the cluster, when the cluster keeps sources (``cluster.source_store()``: the control
  plane's ``/sources`` through ``reconciler.clusters.apisources.ApiSourceStore``; the fake cluster
  in memory), so that a CI runner and a laptop share one inventory and one lock;
* otherwise in a sqlmodel database, ``--state URL`` (``SqlSourceStore``); by default SQLite
  at ``state.db`` in astra's home (``reconciler.home``). An explicit ``--state`` wins.

A source's name (``default_source_name``): ``--source NAME``, else the git remote URL and the
folder's path in the repo (``https://github.com/acme/runs.git//examples``), else the folder's
absolute path.

The shapes kept with the cluster are the wire models' (``reconciler.wire.models``:
``SourceState``, ``InventoryEntry``, ``InventoryDigest``, ``Lock``, ``ApplyRecord``,
``SourceStatus``, ``Written``), and the routes' rules (tags and 304s, the lock on granular
writes) are in ``reconciler.controlplane.api.sources``. The dataclasses here are their
pydantic-free twins (``to_json``/``from_json``), held to the models by
``tests/controlplane_api/test_wire_twins.py``.

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
from .naming import default_source_name, default_state_url, git_commit, open_store, owner, person
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
    "person",
]


def __getattr__(name: str) -> Any:
    """``SqlSourceStore``, imported when first asked for (it brings SQLAlchemy and sqlmodel)."""
    if name == "SqlSourceStore":
        from .sql import SqlSourceStore

        return SqlSourceStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
