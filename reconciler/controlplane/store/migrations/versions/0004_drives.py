"""Drives: an org's workspace's named folders (``drives``: org, workspace, name, path, created_at).

Revision ID: 0004_drives
Revises: 0003_teams
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0004_drives"
down_revision = "0003_teams"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "drives",
        sa.Column("org", sa.String(), nullable=False),
        sa.Column("workspace", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("org", "workspace", "name"),
    )


def downgrade() -> None:
    op.drop_table("drives")
