"""The control plane store's schema: its alembic revisions, run when the store is opened.

``prepare(engine, url)`` makes any database ready for this astra, in one transaction:

* at the head revision (and ``astra_schema`` at ``FENCE``): nothing to do, one ``SELECT``, no
  alembic loaded (``reconciler.migrate.peek``): every open of a database this astra wrote;
* new: the revisions make every table;
* written before alembic (``astra_schema`` at 1 to 4, no revision): the baseline makes the tables
  its version lacked, ``legacy.adopt`` brings its data to schema 4, the later revisions follow;
* at an older revision: the revisions after it run;
* written by a newer astra (``astra_schema`` above ``FENCE``, or a revision these scripts do not
  know): ``SchemaTooNew``, and nothing is changed.

Must not touch: the rows' meaning (``mapping``, ``sources``); SQLAlchemy's errors are the
caller's to map (``Store`` maps them to ``StoreError``).
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine

from ....migrate import Revisions, UnknownRevision, known_revision, peek, upgrade
from ..errors import SchemaTooNew
from .legacy import FENCE, adopt, fence

__all__ = ["BASELINE", "FENCE", "HEAD", "REVISIONS", "prepare"]

BASELINE = "0001_schema4"
#: The newest revision under ``versions/`` (a test holds it to the scripts).
HEAD = "0009_schedules"
REVISIONS = Revisions(Path(__file__).parent, "astra_store_alembic", BASELINE, HEAD)
_PEEK = (
    "SELECT (SELECT version FROM astra_schema WHERE id = 1), "
    f"(SELECT version_num FROM {REVISIONS.version_table})"
)


def prepare(engine: Engine, shown: str) -> None:
    """Bring the database to the head revision (``shown``: its URL without password, for messages)."""
    if peek(engine, _PEEK) == (FENCE, HEAD):
        return
    with engine.begin() as conn:
        legacy = fence(conn)
        if legacy is not None and legacy > FENCE:
            raise SchemaTooNew(
                f"the database {shown} has schema version {legacy}, newer than this astra's {FENCE}: "
                "upgrade astra, or give another --db"
            )
        try:
            found = known_revision(conn, REVISIONS)
        except UnknownRevision as exc:
            raise SchemaTooNew(f"the database {shown} {exc}, or give another --db") from exc
        if found is None:
            upgrade(conn, REVISIONS, BASELINE)
        if legacy is None or legacy < FENCE:
            adopt(conn, legacy)
        if found != HEAD:
            upgrade(conn, REVISIONS)
