"""The source state database's schema: its alembic revisions, run when ``SqlSourceStore`` opens it.

``prepare(engine, url)``, in one transaction:

* at the head revision: nothing to do, one ``SELECT``, no alembic loaded (the fast path of every
  plan that keeps its state in SQL);
* new, or written before alembic (no revision): the baseline makes the tables it lacks, a file
  from before inventory digests gets the column, filled (``add_digests``), the later revisions
  follow;
* at an older revision: the revisions after it run;
* at a revision these scripts do not know: ``StateTooNew`` (a newer astra wrote it), nothing changed.

Must not touch: the rows' meaning (``reconciler.state.sql``); SQLAlchemy's errors are the
caller's to map.
"""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import Column, String, inspect, select
from sqlalchemy.engine import Connection, Engine

from ...migrate import Revisions, UnknownRevision, known_revision, peek, upgrade
from ..types import StateTooNew, digest_of
from .baseline import inventory

__all__ = ["BASELINE", "HEAD", "REVISIONS", "add_digests", "prepare"]

BASELINE = "0001_baseline"
#: The newest revision under ``versions/`` (a test holds it to the scripts).
HEAD = "0002_lock_process"
REVISIONS = Revisions(Path(__file__).parent, "astra_state_alembic", BASELINE, HEAD)
_PEEK = f"SELECT version_num FROM {REVISIONS.version_table}"


def prepare(engine: Engine, shown: str) -> None:
    """Bring the database to the head revision (``shown``: its URL, for messages)."""
    if peek(engine, _PEEK) == (HEAD,):
        return
    with engine.begin() as conn:
        try:
            found = known_revision(conn, REVISIONS)
        except UnknownRevision as exc:
            raise StateTooNew(f"the state database {shown} {exc}, or give another --state") from exc
        if found is None:
            upgrade(conn, REVISIONS, BASELINE)
            add_digests(conn)
        if found != HEAD:
            upgrade(conn, REVISIONS)


def add_digests(conn: Connection) -> None:
    """A state file from before inventory digests (before 35415c2) gets the column, filled for its rows."""
    if "digest" in {c["name"] for c in inspect(conn).get_columns(inventory.name)}:
        return
    from alembic.operations import Operations
    from alembic.runtime.migration import MigrationContext

    Operations(MigrationContext.configure(conn)).add_column(inventory.name, Column("digest", String))
    i = inventory
    for source, run, spec in conn.execute(select(i.c.source, i.c.run, i.c.spec)).all():
        done = i.update().where(i.c.source == source, i.c.run == run)
        conn.execute(done.values(digest=digest_of(json.loads(spec))))
