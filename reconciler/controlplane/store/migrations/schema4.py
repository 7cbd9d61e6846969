"""The control plane's tables as schema 4 left them: the last schema before alembic, frozen.

The baseline revision builds these tables, and ``legacy`` brings older databases to them. They are
a copy on purpose: a migration must keep doing what it did when the live models (``tables``) move
on. Must not touch: the live models; anything after schema 4 (the later revisions' business).
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    func,
    insert,
    select,
)
from sqlalchemy.engine import Connection

__all__ = ["METADATA", "RESOURCE_VERSION", "ensure_sequence", "tables"]

#: The sequence every run document change takes its resource_version from.
RESOURCE_VERSION = "resource_version"

METADATA = MetaData()


def _opt(name: str, kind) -> Column:
    return Column(name, kind, nullable=True)


def _req(name: str, kind, **kw) -> Column:
    return Column(name, kind, nullable=False, **kw)


schema = Table("astra_schema", METADATA, _req("id", Integer, primary_key=True), _req("version", Integer))
sequences = Table("astra_sequences", METADATA, _req("name", String, primary_key=True), _req("value", Integer))
runs = Table(
    "runs",
    METADATA,
    _req("name", String, primary_key=True),
    _req("document", Text),
    _req("resource_version", Integer),
    _req("seq", Integer, index=True),
    *(_req(c, String) for c in ("state", "reason")),
    _req("admitted", Boolean),
    *(_req(c, String) for c in ("start", "on_failure")),
    _req("restarts", Integer),
    *(_opt(c, Float) for c in ("not_before", "placed_at", "running_since")),
    _req("cancel_requested", Boolean),
    _opt("first_failure", String),
    *(_req(c, Float) for c in ("created_at", "updated_at")),
    *(_opt(c, Float) for c in ("started_at", "finished_at")),
)
workers = Table(
    "workers",
    METADATA,
    _req("name", String, primary_key=True),
    _req("run", String, index=True),
    *(_req(c, Integer) for c in ("rank", "world_size")),
    _opt("group", String),
    _opt("group_rank", Integer),
    _req("ask", Text),
    *(_req(c, String) for c in ("state", "reason")),
    _opt("machine", String),
    *(
        _req(c, Integer)
        for c in ("gpus", "unhealthy_gpus", "cpu_cores", "memory_bytes", "restarts", "attempts")
    ),
    *(_opt(c, Float) for c in ("not_before", "placed_at", "started_at", "ended_at")),
    _opt("exit_code", Integer),
    *(_req(c, Boolean) for c in ("final", "settled")),
    _opt("pid", Integer),
    *(_opt(c, String) for c in ("pid_started", "log", "image")),
)
events = Table(
    "events",
    METADATA,
    _req("id", Integer, primary_key=True),
    _req("at", Float),
    _req("run", String, index=True),
    _opt("worker", String),
    _req("kind", String),
    *(_opt(c, String) for c in ("state", "reason", "machine")),
    _opt("exit_code", Integer),
)
machines = Table(
    "machines", METADATA, _req("name", String, primary_key=True), _req("spec", Text), _req("state", String)
)
sources = Table(
    "sources",
    METADATA,
    _req("name", String, primary_key=True),
    _req("data", Text),
    _req("resource_version", Integer),
    _opt("lock", Text),
    _req("updated_at", Float),
    *(_opt(c, Text) for c in ("status", "history")),
)
source_runs = Table(
    "source_runs",
    METADATA,
    _req("source", String, primary_key=True),
    _req("run", String, primary_key=True),
    _req("spec", Text),
    _req("applied_at", Float),
    *(_opt(c, String) for c in ("file", "digest")),
    Index("ix_source_runs_digests", "source", "run", "digest", "applied_at", "file"),
)


def tables() -> list[Table]:
    """Every table of schema 4, in the order they are made."""
    return list(METADATA.sorted_tables)


def ensure_sequence(conn: Connection) -> None:
    """Create the resource_version counter if missing, above every version a run holds.

    A database from before the counter (schema 1) gave each run its own versions from 1: starting
    the counter at their maximum keeps every later version above any earlier one still visible."""
    if conn.execute(select(sequences.c.value).where(sequences.c.name == RESOURCE_VERSION)).scalar() is None:
        top = conn.execute(select(func.max(runs.c.resource_version))).scalar() or 0
        conn.execute(insert(sequences).values(name=RESOURCE_VERSION, value=top))
