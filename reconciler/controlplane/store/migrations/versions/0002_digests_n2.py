"""Inventory digests of an older normalize made again: normalize now drops astra's own
annotations (``astra.revision``, ``astra.source``, ``astra.file``), and its digests say so by their
version (``DIGEST_VERSION`` "n2"). Every ``source_runs`` digest not of the current version is
remade from its spec, so that the plan's fast path finds the runs unchanged again at once.

Revision ID: 0002_digests_n2
Revises: 0001_schema4
"""

import json

from alembic import op
from sqlalchemy import bindparam, select, update

from reconciler.controlplane.store.migrations.schema4 import source_runs
from reconciler.controlplane.store.sources import entry_digest
from reconciler.runspec.normalize import DIGEST_VERSION

__all__ = ["downgrade", "upgrade"]

revision = "0002_digests_n2"
down_revision = "0001_schema4"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    r = source_runs
    rows = [
        {"b_source": source, "b_run": run, "digest": entry_digest(json.loads(spec))}
        for source, run, spec, digest in conn.execute(select(r.c.source, r.c.run, r.c.spec, r.c.digest))
        if digest is not None and not digest.startswith(f"{DIGEST_VERSION}:")
    ]
    if rows:
        stmt = (
            update(r)
            .where(r.c.source == bindparam("b_source"), r.c.run == bindparam("b_run"))
            .values(digest=bindparam("digest"))
        )
        conn.execute(stmt, rows)


def downgrade() -> None:
    """Nothing to undo: an older astra reads any digest it does not make as a difference."""
