"""The store's connection to its database: the SQLAlchemy engine, SQLite's settings, URLs.

SQLite by default (a file, WAL mode, ``synchronous=FULL`` so that an acknowledged write survives a
crash, a busy timeout, foreign keys on); any SQLAlchemy URL works (checked before each use);
``postgresql://`` is psycopg 3 (``reconciler.migrate.engine_url``).

``execute_many`` runs one statement with many rows (a batch's runs, a tick's updates; each
statement made once, so that it is compiled once: ``insert_many`` for a table's ``INSERT``): what
``Connection.execute(stmt, rows)`` does, with less Python per row where the driver takes its
parameters by position (SQLite's).

Must not touch: tables, rows, the schema (``tables``, ``migrations``).
"""

from __future__ import annotations

import functools
import operator
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Table, event, insert
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.sql import Executable
from sqlmodel import create_engine

from ...migrate import engine_url, redact

__all__ = ["default_url", "execute_many", "insert_many", "make_engine", "redact"]


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


def execute_many(conn: Connection, stmt: Executable, rows: Sequence[Mapping[str, Any]]) -> None:
    """``conn.execute(stmt, rows)``: ``stmt`` run once for each row (rows of the same keys).

    SQLAlchemy makes a dict of every row's parameters, then a tuple of it for a driver that takes
    them by position: a third of the time of writing a batch of 500 runs' rows. Here the
    statement is compiled once for its dialect and the rows' keys (``_by_position``), and each
    row is handed to the driver as the tuple of its values in the statement's order (taken by one
    ``itemgetter``), those of a type with a bind processor through it (a boolean as SQLite keeps
    it): the values the driver is given are SQLAlchemy's own. Where that does not hold (a driver that takes
    named parameters, as PostgreSQL's; a parameter that is no key of the rows, as a column's
    default), ``conn.execute`` runs it as it is."""
    if not rows:
        return
    plan = _by_position(stmt, conn.dialect, tuple(rows[0]))
    if plan is None:
        conn.execute(stmt, list(rows))
        return
    sql, values_of, processed = plan
    params = list(map(values_of, rows))
    if processed:
        for at, row in enumerate(params):
            values = list(row)
            for i, process in processed:
                values[i] = process(values[i])
            params[at] = tuple(values)
    conn.exec_driver_sql(sql, params)


def insert_many(conn: Connection, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """``rows`` inserted into ``table`` (``execute_many`` of its one ``INSERT``)."""
    execute_many(conn, _insert(table), rows)


@functools.cache
def _insert(table: Table) -> Executable:
    return insert(table)


#: A row's values in the order of a statement's parameters.
_Values = Callable[[Mapping[str, Any]], tuple[Any, ...]]
#: Each parameter whose type has a bind processor: its place, and the processor.
_Processed = tuple[tuple[int, Callable[[Any], Any]], ...]


@functools.lru_cache(maxsize=64)
def _by_position(
    stmt: Executable, dialect: Dialect, keys: tuple[str, ...]
) -> tuple[str, _Values, _Processed] | None:
    """``stmt`` compiled for ``dialect`` and rows of ``keys``: its SQL, what takes a row's values
    in the order of its parameters (an ``itemgetter``), and the bind processor of each parameter
    whose type has one, by its place; ``None`` when its parameters are not positional, or not all
    keys of the rows."""
    compiled = stmt.compile(dialect=dialect, column_keys=list(keys))  # type: ignore[attr-defined]
    order = tuple(compiled.positiontup or ())
    if not compiled.positional or not order or not set(order) <= set(keys):
        return None
    types = [compiled.binds[k].type.dialect_impl(dialect) for k in order]
    processed = tuple((i, p) for i, t in enumerate(types) if (p := t.bind_processor(dialect)) is not None)
    values_of = operator.itemgetter(*order) if len(order) > 1 else lambda row: (row[order[0]],)
    return compiled.string, values_of, processed
