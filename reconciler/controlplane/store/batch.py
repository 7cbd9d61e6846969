"""Many runs created in one transaction (``POST /runs:batch``), recorded in a source's inventory.

Owns ``BatchWrites``, the part of ``Store`` that writes a batch: its runs inserted with one bulk
statement, each with its own ``resource_version`` (the store's counter moved once by the number
of runs, so the versions are consecutive and still only grow), and, when a source records them,
their inventory entries written in the same transaction under the source's apply lock, the
source's resource_version moved once; and the runs' audit events, in that transaction too (a
server killed after it leaves no run without its event). Either all of it is written or none of
it (a ``LockMismatch`` or a ``NameExists`` leaves the database as it was).

Must not touch: validation (the API's), the scheduler's records (the engine's), HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError

from ..scheduler import RunRecord
from .database import insert_many
from .errors import NameExists
from .mapping import run_values
from .migrations.schema4 import RESOURCE_VERSION
from .sources import KeptSources, compact, source_run_row
from .tables import RUNS, SEQUENCES, SOURCE_RUNS
from .teams import write_audit

__all__ = ["BatchRecord", "BatchWrites"]


@dataclass(frozen=True)
class BatchRecord:
    """Where a batch's runs are recorded: ``source``'s inventory, under ``lock_id``; each entry
    is ``{"spec", "applied_at", "file"}``, by run name; ``digests``: each entry's digest
    (``sources.entry_digest`` of its spec) where the caller made it already."""

    source: str
    lock_id: str | None
    entries: Mapping[str, Mapping[str, Any]]
    digests: Mapping[str, str | None] = field(default_factory=dict)


class BatchWrites(KeptSources):
    """The batch's part of ``Store``: ``create_runs``, one transaction (a source's lock and
    version as ``KeptSources`` keeps them)."""

    def create_runs(
        self,
        runs: Sequence[tuple[RunRecord, dict[str, Any]]],
        now: float,
        record: BatchRecord | None = None,
        audit: tuple[Sequence[Mapping[str, Any]], int] | None = None,
    ) -> list[int]:
        """Insert ``runs`` (each a record and its stored document) and, with ``record``, their
        inventory entries, and with ``audit`` (events, and how many each workspace keeps:
        ``KeptTeams.add_audit``'s) their audit events: one transaction, so that no run is left
        without its entry or its event. Each run's resource_version, in order.

        ``NameExists`` when a name is taken; ``LockMismatch`` when ``record``'s lock is not the
        source's: nothing is written then."""
        if not runs:
            return []
        seq = SEQUENCES
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    update(seq).where(seq.c.name == RESOURCE_VERSION).values(value=seq.c.value + len(runs))
                )
                last = conn.execute(select(seq.c.value).where(seq.c.name == RESOURCE_VERSION)).scalar_one()
                versions = list(range(last - len(runs) + 1, last + 1))
                rows = [_run_row(r, doc, now, rv) for (r, doc), rv in zip(runs, versions, strict=True)]
                insert_many(conn, RUNS, rows)
                if record is not None and record.entries:
                    self._record(conn, record, now)
                if audit is not None:
                    write_audit(conn, *audit)
        except IntegrityError as exc:
            raise NameExists(f"a run of this batch exists already: {exc.orig}") from exc
        return versions

    def _record(self, conn: Any, record: BatchRecord, now: float) -> None:
        """The entries written over any the source had for those runs; its version moved once."""
        self._write_source(conn, record.source, now, record.lock_id, need_lock=True)
        r = SOURCE_RUNS
        names = list(record.entries)
        for i in range(0, len(names), 500):  # bound the statement's parameters
            conn.execute(delete(r).where(r.c.source == record.source, r.c.run.in_(names[i : i + 500])))
        made = record.digests
        rows = [source_run_row(record.source, n, e, made.get(n)) for n, e in record.entries.items()]
        insert_many(conn, r, rows)


def _run_row(record: RunRecord, document: dict[str, Any], now: float, rv: int) -> dict[str, Any]:
    return {
        "name": record.name,
        "document": compact(document),
        "seq": record.seq,
        "created_at": now,
        "updated_at": now,
        "resource_version": rv,
        **run_values(record),
    }
