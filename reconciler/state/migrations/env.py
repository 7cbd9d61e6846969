"""alembic's entry into the source state's revisions (``reconciler.migrate.upgrade`` runs it)."""

from alembic import context

from reconciler.migrate import run_env

__all__: list[str] = []

run_env(context)
