"""The control plane's database: runs, workers, events, machines, sources and teams, through sqlmodel.

``Store(url)`` opens a database (SQLite by default; any SQLAlchemy URL), brings it to this
astra's schema, and is ready. The parts, each a module of its own:

* ``tables``: the sqlmodel classes (the columns at the head revision);
* ``mapping``: rows <-> the scheduler's ``RunRecord``/``WorkerRecord``, and a tick's rows;
* ``sources``: the reconcile sources' state kept with the cluster (``/sources``);
* ``teams``: workspaces, tokens (their hashes), quotas and the audit trail;
* ``drives``: a workspace's named folders (``/drives``);
* ``secrets``, ``secretbox``: a workspace's secrets, sealed with AES-GCM (``/secrets``);
* ``migrations``: the alembic revisions run at open, and databases from before alembic;
* ``database``: the engine, SQLite's settings, URLs; ``errors``: the exceptions;
* ``facade``: ``Store``, the one object the engine and the API hold.

Must not touch: the scheduler's decisions, processes, HTTP; it never reads a clock.

The exceptions (``StoreError`` and the tree under it) are drawn in ``errors``.
"""

from __future__ import annotations

from ...runspec.vocabulary import HISTORY_KEEP
from .batch import BatchRecord
from .database import default_url
from .errors import LockMismatch, NameExists, NotFound, SchemaTooNew, SecretKeyError, Stale, StoreError
from .facade import Store
from .mapping import TickWrite, run_record, worker_record
from .migrations import FENCE as SCHEMA_VERSION
from .secretbox import SecretBox
from .tables import (
    AuditRow,
    DriveRow,
    EventRow,
    MachineRow,
    RunRow,
    SchemaVersion,
    SequenceRow,
    SourceRow,
    SourceRunRow,
    WorkerRow,
)
from .usage import HoldChanges

__all__ = [
    "HISTORY_KEEP",
    "SCHEMA_VERSION",
    "AuditRow",
    "BatchRecord",
    "DriveRow",
    "EventRow",
    "HoldChanges",
    "LockMismatch",
    "MachineRow",
    "NameExists",
    "NotFound",
    "RunRow",
    "SchemaTooNew",
    "SchemaVersion",
    "SecretBox",
    "SecretKeyError",
    "SequenceRow",
    "SourceRow",
    "SourceRunRow",
    "Stale",
    "Store",
    "StoreError",
    "TickWrite",
    "WorkerRow",
    "default_url",
    "run_record",
    "worker_record",
]
