"""Databases written before alembic (schema versions 1 to 4, in ``astra_schema``), brought to schema 4.

Schema 4 is the baseline revision; what the versions before it changed is done here, once, when
such a database is first opened (the baseline has made the tables it lacked):

* 2: the ``astra_sequences`` table (one resource_version counter for every run), seeded above
  every version a run holds (``schema4.ensure_sequence``);
* 3: a source's inventory as one ``source_runs`` row per (source, run); its status and history
  in columns of its ``sources`` row (``split_sources``, from the source's one JSON object);
* 4: each ``source_runs`` row's ``digest`` of its normalised spec (``digest_source_runs``).

``astra_schema`` stays, at 4 (``FENCE``): the astras before alembic read it and refuse a
database whose version is above theirs, so a revision they could not read must raise it.

Must not touch: anything after schema 4 (the revisions'), the live models (``tables``).
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Column, String, Text, bindparam, delete, insert, inspect, select, update
from sqlalchemy.engine import Connection

from ....runspec.vocabulary import HISTORY_KEEP
from ..sources import compact, entry_digest, source_run_row
from .schema4 import METADATA, ensure_sequence, schema, source_runs, sources

__all__ = ["FENCE", "adopt", "digest_source_runs", "fence", "split_sources"]

#: The schema version this astra writes in ``astra_schema`` and accepts there (above it: a newer
#: astra's database). The last version before alembic, and the baseline revision's.
FENCE = 4


def fence(conn: Connection) -> int | None:
    """The version in ``astra_schema``; ``None`` when the table or its row is missing (a new database)."""
    if not inspect(conn).has_table(schema.name):
        return None
    return conn.execute(select(schema.c.version)).scalar()


def adopt(conn: Connection, found: int | None) -> None:
    """Bring a database at schema ``found`` (``None``: a new one) to schema 4; ``astra_schema`` says 4."""
    METADATA.create_all(conn, checkfirst=True)  # the tables its version lacked
    if found is not None and found < 3:
        split_sources(conn)
    if found is not None and found < 4:
        digest_source_runs(conn)
    ensure_sequence(conn)
    if conn.execute(update(schema).values(version=FENCE)).rowcount == 0:
        conn.execute(insert(schema).values(id=1, version=FENCE))


def split_sources(conn: Connection) -> None:
    """Bring sources written before schema 3 (one JSON object each) into the rows of schema 3.

    The ``status`` and ``history`` columns are added; each source's ``inventory`` (a map of run
    to ``{"spec", "applied_at", "file"}``, as astra writes it) becomes its ``source_runs`` rows,
    its ``status`` and ``history`` their columns; every other key stays in ``data``. An
    ``inventory`` of another shape is kept, as ``legacy_inventory``."""
    have = {c["name"] for c in inspect(conn).get_columns("sources")}
    for column in ("status", "history"):
        if column not in have:
            _ops(conn).add_column("sources", Column(column, Text, nullable=True))
    s, r = sources, source_runs
    for name, raw in conn.execute(select(s.c.name, s.c.data)).all():
        try:
            data = json.loads(raw or "{}")
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        inventory = data.pop("inventory", None)
        status = data.pop("status", None)
        history = data.pop("history", None)
        rows = []
        if isinstance(inventory, dict) and all(
            isinstance(e, dict) and isinstance(e.get("spec"), dict) for e in inventory.values()
        ):
            rows = [source_run_row(name, run, e) for run, e in inventory.items()]
        elif inventory is not None:
            data["legacy_inventory"] = inventory
        if status is not None and not isinstance(status, dict):
            data["legacy_status"], status = status, None
        if history is not None and not isinstance(history, list):
            data["legacy_history"], history = history, None
        conn.execute(
            update(s)
            .where(s.c.name == name)
            .values(
                data=compact(data),
                status=None if status is None else compact(status),
                history=None if history is None else compact(history[-HISTORY_KEEP:]),
            )
        )
        conn.execute(delete(r).where(r.c.source == name))
        if rows:
            conn.execute(insert(r), rows)


def digest_source_runs(conn: Connection) -> None:
    """Bring ``source_runs`` written before schema 4 up to date: the ``digest`` column added,
    filled for every row that has none (``sources.entry_digest`` of its spec), and its index made."""
    if "digest" not in {c["name"] for c in inspect(conn).get_columns("source_runs")}:
        _ops(conn).add_column("source_runs", Column("digest", String, nullable=True))
    r = source_runs
    rows = [
        {"b_source": source, "b_run": run, "digest": entry_digest(json.loads(spec))}
        for source, run, spec in conn.execute(
            select(r.c.source, r.c.run, r.c.spec).where(r.c.digest.is_(None))
        )
    ]
    if rows:
        stmt = (
            update(r)
            .where(r.c.source == bindparam("b_source"), r.c.run == bindparam("b_run"))
            .values(digest=bindparam("digest"))
        )
        conn.execute(stmt, rows)
    for index in r.indexes:
        index.create(conn, checkfirst=True)


def _ops(conn: Connection) -> Any:
    """alembic's operations on ``conn`` (its ``add_column`` speaks every database's dialect)."""
    from alembic.operations import Operations
    from alembic.runtime.migration import MigrationContext

    return Operations(MigrationContext.configure(conn))
