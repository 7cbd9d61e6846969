"""GPU-hours: each worker's hold of GPUs (``gpu_holds``), what ``astra usage`` adds up, and the
workspaces' GPU-hour budgets (``gpu_budgets``) (issue 35).

Revision ID: 0007_gpu_holds
Revises: 0006_secrets
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0007_gpu_holds"
down_revision = "0006_secrets"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gpu_holds",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run", sa.String(), nullable=False),
        sa.Column("worker", sa.String(), nullable=False),
        sa.Column("org", sa.String(), nullable=False),
        sa.Column("workspace", sa.String(), nullable=False),
        sa.Column("cluster", sa.String(), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.Column("outcome", sa.String(), nullable=True),
        sa.Column("labels", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_gpu_holds_scope", "gpu_holds", ["org", "workspace", "cluster", "started_at"])
    op.create_index("ix_gpu_holds_open", "gpu_holds", ["worker", "ended_at"])
    op.create_index("ix_gpu_holds_run", "gpu_holds", ["run"])
    op.create_table(
        "gpu_budgets",
        sa.Column("org", sa.String(), nullable=False),
        sa.Column("workspace", sa.String(), nullable=False),
        sa.Column("cluster", sa.String(), nullable=False),
        sa.Column("gpu_hours", sa.Integer(), nullable=False),
        sa.Column("per", sa.String(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("org", "workspace", "cluster"),
    )


def downgrade() -> None:
    op.drop_table("gpu_budgets")
    op.drop_table("gpu_holds")
