"""Schema migrations by alembic, run at open: the one runner both of astra's databases use.

Owns how a database's revision is read, checked against the revisions a package ships, and
brought to the head: ``Revisions`` names a package's folder of alembic scripts (``env.py`` and
``versions/``, shipped inside the wheel; users need no ``alembic.ini``) and its version table.
The control plane's store (``reconciler.controlplane.store.migrations``) and the source state
(``reconciler.state.migrations``) each have one.

Opening a database that is already at the head costs one small ``SELECT`` and imports nothing of
alembic (``peek``): the fast path of every open, on the warm plan's path. Only a database that
needs work (a new one, one written by an astra before alembic, one at an older revision) loads
alembic, and that in the caller's transaction. A revision the scripts do not know was written by
a newer astra: ``known_revision`` raises ``UnknownRevision``, and each store refuses to open the
database with its own error.

A new revision: a file in the package's ``versions/`` whose ``down_revision`` is the current head,
with ``upgrade()`` (and ``downgrade()``) written with ``alembic.op``; then move the package's
``HEAD`` to it (a test holds ``HEAD`` to the scripts' head).

Also owns the URLs both databases accept (``engine_url``): any SQLAlchemy URL; ``postgresql://``
(and ``postgres://``) mean psycopg 3 (``pip install 'astra-reconciler[postgres]'``), and a driver
that is not installed is said in those words (``DriverMissing``), never as an import error.
``redact`` is a URL fit for a message (no password).

Must not touch: any table (the scripts do), the stores' errors (callers map ``MigrationError`` and
SQLAlchemy's errors to theirs).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

__all__ = [
    "DriverMissing",
    "MigrationError",
    "Revisions",
    "UnknownRevision",
    "engine_url",
    "known_revision",
    "peek",
    "redact",
    "revision",
    "run_env",
    "script_revisions",
    "upgrade",
]

log = logging.getLogger(__name__)


class MigrationError(Exception):
    """The scripts cannot bring the database to the revision asked (alembic's error, mapped)."""


class UnknownRevision(MigrationError):
    """The database is at a revision the scripts do not know: a newer astra wrote it."""

    def __init__(self, found: str, head: str):
        super().__init__(
            f"is at schema revision {found}, which this astra does not know (its newest is {head}): "
            "a newer astra wrote it; upgrade astra"
        )
        self.found = found


class DriverMissing(MigrationError):
    """The URL names a database whose driver is not installed; the message says what to install."""


#: The URL schemes that mean PostgreSQL through psycopg 3, and the extra that installs it.
_POSTGRES = ("postgresql", "postgres", "postgresql+psycopg")
POSTGRES_EXTRA = "pip install 'astra-reconciler[postgres]'"


def engine_url(url: str) -> str:
    """The SQLAlchemy URL for ``url``: ``postgresql://…`` (or ``postgres://…``) is psycopg 3's
    ``postgresql+psycopg://…``; ``DriverMissing`` when that driver is not installed."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in _POSTGRES:
        return url
    from importlib.util import find_spec

    if find_spec("psycopg") is None:
        raise DriverMissing(f"PostgreSQL needs the psycopg driver, which is not installed: {POSTGRES_EXTRA}")
    return f"postgresql+psycopg://{rest}"


def redact(url: str) -> str:
    """A URL fit for a message: no password."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}"
    return url


@dataclass(frozen=True)
class Revisions:
    """One database's migrations: its scripts' folder, version table, first and last revisions."""

    #: The folder holding ``env.py`` and ``versions/``.
    scripts: Path
    #: Where alembic keeps the database's revision (each database its own name: two of astra's
    #: databases may share one SQL database).
    version_table: str
    #: The first revision: the schema as astra left it before alembic.
    baseline: str
    #: The last revision, known without loading the scripts (a test holds it to them).
    head: str


def peek(engine: Engine, sql: str) -> tuple[Any, ...] | None:
    """The one row of ``sql`` (a ``SELECT`` of the version tables), or ``None`` when it cannot be
    read (a new database, one before alembic): then the caller takes the slow path."""
    try:
        with engine.connect() as conn:
            row = conn.execute(text(sql)).first()
    except DBAPIError as exc:
        log.debug("schema check: the slow path (%s)", exc.orig)
        return None
    return None if row is None else tuple(row)


def revision(conn: Connection, revs: Revisions) -> str | None:
    """The database's revision, ``None`` when it has none (new, or written before alembic)."""
    if not inspect(conn).has_table(revs.version_table):
        return None
    return conn.execute(text(f"SELECT version_num FROM {revs.version_table}")).scalar()


@cache
def _scripts(folder: Path) -> Any:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(folder))
    return config, ScriptDirectory.from_config(config)


def script_revisions(revs: Revisions) -> list[str]:
    """Every revision the scripts hold, from the head down to the baseline."""
    return [s.revision for s in _scripts(revs.scripts)[1].walk_revisions()]


def known_revision(conn: Connection, revs: Revisions) -> str | None:
    """The database's revision (``None``: none yet); ``UnknownRevision`` when the scripts lack it."""
    found = revision(conn, revs)
    if found is not None and found not in script_revisions(revs):
        raise UnknownRevision(found, revs.head)
    return found


def upgrade(conn: Connection, revs: Revisions, target: str = "head") -> None:
    """Run the scripts from the database's revision up to ``target``, in ``conn``'s transaction."""
    from alembic import command

    config, _ = _scripts(revs.scripts)
    config.attributes["connection"] = conn
    config.attributes["version_table"] = revs.version_table
    from alembic.util import CommandError

    try:
        command.upgrade(config, target)
    except CommandError as exc:
        raise MigrationError(f"cannot migrate the database to {target}: {exc}") from exc
    finally:
        config.attributes.clear()


def run_env(context: Any) -> None:
    """The body of each scripts folder's ``env.py``: migrate on the connection ``upgrade`` gave."""
    attributes = context.config.attributes
    context.configure(connection=attributes["connection"], version_table=attributes["version_table"])
    with context.begin_transaction():
        context.run_migrations()
