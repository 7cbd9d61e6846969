"""The store's connection to its database: the SQLAlchemy engine, SQLite's settings, URLs.

SQLite by default (a file, WAL mode, ``synchronous=FULL`` so that an acknowledged write survives a
crash, a busy timeout, foreign keys on); any SQLAlchemy URL works (checked before each use);
``postgresql://`` is psycopg 3 (``reconciler.migrate.engine_url``).

Must not touch: tables, rows, the schema (``tables``, ``migrations``).
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import create_engine

from ...migrate import engine_url, redact

__all__ = ["default_url", "make_engine", "redact"]


def default_url(home: str | os.PathLike[str]) -> str:
    """``sqlite:///HOME/astra.db``: the default database of a server whose home is ``home``."""
    return f"sqlite:///{Path(home).resolve() / 'astra.db'}"


def make_engine(url: str) -> Engine:
    """The engine for ``url``; for a SQLite file, its folder is made and its settings set."""
    if not url.startswith("sqlite"):
        return create_engine(engine_url(url), pool_pre_ping=True)
    path = url.split(":///", 1)[1] if ":///" in url else ""
    if path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn, _record):
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=FULL")
        cur.execute("PRAGMA busy_timeout=5000")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    return engine
