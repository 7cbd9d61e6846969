"""Workers say why they were last restarted (``workers.restart_reason``: Preempted, Failed,
MachineLost…; null before the first restart), for ``ASTRAEUS_RESTART_REASON``.

Revision ID: 0005_restart_reason
Revises: 0004_drives
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0005_restart_reason"
down_revision = "0004_drives"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("restart_reason", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("restart_reason")
