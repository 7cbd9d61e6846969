"""Teams on one cluster: orgs, workspaces, tokens (their hashes), quotas, the audit trail, and
the machines of clusters other than the default.

Nothing existing changes: the runs, workers and sources of the default org, workspace and
cluster keep their names as keys (``reconciler.controlplane.scopes``); the org ``default`` and its
workspace ``default`` are made here.

Revision ID: 0003_teams
Revises: 0002_digests_n2
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0003_teams"
down_revision = "0002_digests_n2"
branch_labels = None
depends_on = None

TABLES = ("cluster_machines", "orgs", "workspaces", "tokens", "quotas", "audit_events")


def _text(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.String(), nullable=nullable)


def upgrade() -> None:
    """The tables of this revision, each written out whole (over 60 lines: a migration is a record
    of the schema as it was, and reads best as one list of its tables, not split by a helper)."""
    op.create_table(
        "cluster_machines",
        _text("cluster"),
        _text("name"),
        sa.Column("spec", sa.Text(), nullable=False),
        _text("state"),
        sa.PrimaryKeyConstraint("cluster", "name"),
    )
    orgs = op.create_table(
        "orgs",
        _text("name"),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    workspaces = op.create_table(
        "workspaces",
        _text("org"),
        _text("name"),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("org", "name"),
    )
    op.create_table(
        "tokens",
        _text("org"),
        _text("name"),
        _text("workspace", nullable=True),
        _text("role"),
        _text("hash"),
        sa.Column("created_at", sa.Float(), nullable=False),
        _text("created_by"),
        sa.PrimaryKeyConstraint("org", "name"),
        sa.UniqueConstraint("hash"),
    )
    op.create_table(
        "quotas",
        _text("org"),
        _text("workspace"),
        _text("cluster"),
        sa.Column("gpus", sa.Integer(), nullable=True),
        sa.Column("runs", sa.Integer(), nullable=True),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("org", "workspace", "cluster"),
    )
    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        _text("org"),
        _text("workspace"),
        _text("cluster", nullable=True),
        _text("token"),
        _text("action"),
        _text("kind"),
        _text("name"),
        _text("source", nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_audit_events_workspace", "audit_events", ["org", "workspace", "id"])
    op.bulk_insert(orgs, [{"name": "default", "created_at": 0.0}])
    op.bulk_insert(workspaces, [{"org": "default", "name": "default", "created_at": 0.0}])


def downgrade() -> None:
    op.drop_index("ix_audit_events_workspace", "audit_events")
    for table in reversed(TABLES):
        op.drop_table(table)
