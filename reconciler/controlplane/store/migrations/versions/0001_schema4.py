"""The baseline: the control plane's tables as schema 4 (the last version before alembic) left them.

On a new database it makes every table and the resource_version counter. On a database written
before alembic it makes only the tables that database lacks; ``legacy.adopt`` then brings the
data of schemas 1 to 3 up to schema 4.

Revision ID: 0001_schema4
Revises: (none)
"""

from alembic import op

from reconciler.controlplane.store.migrations.schema4 import METADATA, ensure_sequence

__all__ = ["downgrade", "upgrade"]

revision = "0001_schema4"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    METADATA.create_all(bind, checkfirst=True)
    ensure_sequence(bind)


def downgrade() -> None:
    METADATA.drop_all(op.get_bind())
