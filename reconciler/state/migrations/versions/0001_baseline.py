"""The baseline: the source state's tables as astra left them before alembic (d65e8ab).

On a new database it makes every table. On one written before alembic it makes only the tables
that database lacks; ``migrations.add_digests`` then gives a file from before inventory digests
its ``digest`` column.

Revision ID: 0001_baseline
Revises: (none)
"""

from alembic import op

from reconciler.state.migrations.baseline import METADATA

__all__ = ["downgrade", "upgrade"]

revision = "0001_baseline"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    METADATA.create_all(op.get_bind(), checkfirst=True)


def downgrade() -> None:
    METADATA.drop_all(op.get_bind())
