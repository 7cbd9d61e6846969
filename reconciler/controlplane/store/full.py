"""A full disk, in words: whether an error is the store's (or the home's) disk being full, and what
the server says then.

Owns ``disk_full(exc)`` (SQLite's ``SQLITE_FULL``, "database or disk is full"; PostgreSQL's
``disk_full``, SQLSTATE 53100; ``ENOSPC`` or ``EDQUOT`` from the system: anywhere in the chain
of causes) and ``full_words(url)``: ``the server's store at PATH is full: free space or move
ASTRA_HOME`` (PATH the SQLite file, or the database's URL without its password). The API answers
every write that meets it with a 503 in those words (``api.app``), and ``astra server`` says them
when it cannot start (``controlplane.server``); reads go on. Must not touch: the database.
"""

from __future__ import annotations

import errno

from ...migrate import redact

__all__ = ["disk_full", "full_words", "store_place"]

#: SQLite's result code for a full disk (``SQLITE_FULL``).
SQLITE_FULL = 13
#: PostgreSQL's SQLSTATE for a full disk (``disk_full``).
PG_DISK_FULL = "53100"
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) says the disk is full."""
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        seen.add(id(found))
        if _says_full(found):
            return True
        found = getattr(found, "orig", None) or found.__cause__ or found.__context__
    return False


def _says_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return True
    if getattr(exc, "sqlite_errorcode", None) == SQLITE_FULL:
        return True
    if getattr(exc, "sqlstate", None) == PG_DISK_FULL or getattr(exc, "pgcode", None) == PG_DISK_FULL:
        return True
    return "database or disk is full" in str(exc)


def store_place(url: str) -> str:
    """Where the store is, for a person: a SQLite URL's file, else the URL without its password."""
    for prefix in ("sqlite:///", "sqlite+pysqlite:///"):
        if url.startswith(prefix):
            return url[len(prefix) :].split("?", 1)[0] or url
    return redact(url)


def full_words(url: str) -> str:
    """What the server says when the store's disk is full."""
    return f"the server's store at {store_place(url)} is full: free space or move ASTRA_HOME"
