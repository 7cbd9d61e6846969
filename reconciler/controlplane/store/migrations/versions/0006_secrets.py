"""Secrets: an org's workspace's sealed values (``secrets``: org, workspace, name, key_id,
sealed, size, set_by, set_at, created_at).

Revision ID: 0006_secrets
Revises: 0005_restart_reason
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0006_secrets"
down_revision = "0005_restart_reason"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "secrets",
        sa.Column("org", sa.String(), nullable=False),
        sa.Column("workspace", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("key_id", sa.String(), nullable=False),
        sa.Column("sealed", sa.LargeBinary(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("set_by", sa.String(), nullable=False),
        sa.Column("set_at", sa.Float(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("org", "workspace", "name"),
    )


def downgrade() -> None:
    op.drop_table("secrets")
