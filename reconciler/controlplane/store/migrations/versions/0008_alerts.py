"""Alerts: the rules (``alerts``), the outbox of their messages (``alert_outbox``), and how far
the events were read (``alert_cursor``).

Revision ID: 0008_alerts
Revises: 0007_gpu_holds
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0008_alerts"
down_revision = "0007_gpu_holds"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "alerts",
        sa.Column("workspace", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("rule", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("workspace", "name"),
    )
    op.create_table(
        "alert_outbox",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("workspace", sa.String(), nullable=False),
        sa.Column("alert", sa.String(), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("event", sa.Text(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_at", sa.Float(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("done_at", sa.Float(), nullable=True),
        sa.Column("answer", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("workspace", "alert", "key", name="alert_outbox_once"),
    )
    op.create_index("ix_alert_outbox_workspace", "alert_outbox", ["workspace"])
    op.create_index("ix_alert_outbox_state", "alert_outbox", ["state"])
    op.create_table(
        "alert_cursor",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )


def downgrade() -> None:
    op.drop_table("alert_cursor")
    op.drop_index("ix_alert_outbox_state", "alert_outbox")
    op.drop_index("ix_alert_outbox_workspace", "alert_outbox")
    op.drop_table("alert_outbox")
    op.drop_table("alerts")
