"""The process that took a source's apply lock: its host, pid and start (``Lock.host``, ``pid``,
``started``), so that a lock left by a dead apply on this host is told from one held (issue 12).

Three nullable columns of ``astra_sources``; a lock taken before has none (it cannot be told).

Revision ID: 0002_lock_process
Revises: 0001_baseline
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0002_lock_process"
down_revision = "0001_baseline"
branch_labels = None
depends_on = None

COLUMNS = (("lock_host", sa.String), ("lock_pid", sa.Integer), ("lock_started", sa.String))


def upgrade() -> None:
    for name, kind in COLUMNS:
        op.add_column("astra_sources", sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("astra_sources") as table:
        for name, _ in COLUMNS:
            table.drop_column(name)
