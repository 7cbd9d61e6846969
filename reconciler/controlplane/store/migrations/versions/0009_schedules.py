"""Schedules (``spec.schedule``): what each run on a schedule keeps between ticks and across a
restart (``schedules``): the latest scheduled time acted on, CronJob's ``lastScheduleTime`` and
``lastSuccessfulTime``, and whether it is suspended (by whom, since when).

Revision ID: 0009_schedules
Revises: 0008_alerts
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0009_schedules"
down_revision = "0008_alerts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("run", sa.String(), nullable=False),
        sa.Column("run_created_at", sa.Float(), nullable=False),
        sa.Column("acted_at", sa.Float(), nullable=False),
        sa.Column("last_schedule_at", sa.Float(), nullable=True),
        sa.Column("last_successful_at", sa.Float(), nullable=True),
        sa.Column("suspended", sa.Boolean(), nullable=False),
        sa.Column("suspended_at", sa.Float(), nullable=True),
        sa.Column("suspended_by", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("run"),
    )


def downgrade() -> None:
    op.drop_table("schedules")
