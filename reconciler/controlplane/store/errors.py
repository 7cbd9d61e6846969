"""The control plane store's errors: one tree, SQLAlchemy's errors mapped into it at the boundary.

Must not touch: the database (the other modules of the store raise these).

Exceptions::

    StoreError              the database cannot be used (mapped from SQLAlchemy at the boundary)
    ├── SchemaTooNew        written by a newer astra: upgrade astra, or use another --db
    ├── NameExists          a run (or a worker name) of that name exists
    ├── NotFound            no such run, worker or source
    ├── Stale               the resource_version given is not the current one (holds ``current``)
    ├── LockMismatch        a source write names a lock that is not the one held (holds ``lock``)
    └── SecretKeyError      the secrets key cannot be read or made, or a value does not open with it
"""

from __future__ import annotations

from typing import Any

__all__ = ["LockMismatch", "NameExists", "NotFound", "SchemaTooNew", "SecretKeyError", "Stale", "StoreError"]


class StoreError(Exception):
    """The database cannot do what was asked."""


class SchemaTooNew(StoreError):
    """The database was written by a newer astra: this one refuses to open it."""


class NameExists(StoreError):
    """A run of that name exists already."""


class NotFound(StoreError):
    """No run of that name."""


class Stale(StoreError):
    """The resource_version given is not the current one (``current``)."""

    def __init__(self, message: str, current: int):
        super().__init__(message)
        self.current = current


class LockMismatch(StoreError):
    """A source write needs (or names) a lock that is not the one held (``lock``: the holder's, or None)."""

    def __init__(self, message: str, lock: dict[str, Any] | None):
        super().__init__(message)
        self.lock = lock


class SecretKeyError(StoreError):
    """The secrets key cannot be read or made, or a value does not open with the keys held
    (``secretbox``); its words never hold a key or a value."""
