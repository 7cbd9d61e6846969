"""The source state's tables as astra left them before alembic (d65e8ab), frozen.

The baseline revision builds these tables; a copy on purpose, so that the migration keeps doing
what it did when the live models (``reconciler.state.sql``) move on. Must not touch: the live
models; anything after the baseline (the later revisions' business).
"""

from __future__ import annotations

from sqlalchemy import Column, Float, Integer, MetaData, String, Table, Text

__all__ = ["METADATA", "history", "inventory", "sources"]

METADATA = MetaData()

sources = Table(
    "astra_sources",
    METADATA,
    Column("name", String, primary_key=True),
    Column("resource_version", Integer, nullable=False),
    Column("status", Text, nullable=False),
    Column("lock_id", String, nullable=True),
    Column("lock_owner", String, nullable=True),
    Column("lock_created_at", Float, nullable=True),
)
inventory = Table(
    "astra_inventory",
    METADATA,
    Column("source", String, primary_key=True),
    Column("run", String, primary_key=True),
    Column("spec", Text, nullable=False),
    Column("applied_at", Float, nullable=False),
    Column("file", String, nullable=True),
    Column("digest", String, nullable=True),
)
history = Table(
    "astra_history",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("source", String, nullable=False, index=True),
    Column("who", String, nullable=False),
    Column("at", Float, nullable=False),
    Column("git_commit", String, nullable=True),
    Column("summary", Text, nullable=False),
    Column("result", Text, nullable=False),
)
