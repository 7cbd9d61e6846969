"""The schedules of the store: what each run on a schedule keeps (``schedules``).

Owns the reads and writes of ``schedules`` (``KeptSchedules``, the part of ``Store`` that serves
them): a row written whole with the events that say why (a run made, a time skipped), in one
transaction. A row outlives its run (a run made again under its name keeps its suspension).

Must not touch: runs, workers (``facade``), when a schedule fires (``controlplane.schedules``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Engine

from .schedule_tables import SCHEDULES
from .tables import EVENTS

__all__ = ["KeptSchedules"]


class KeptSchedules:
    """The schedules' part of ``Store``: every method is one transaction on ``self.engine``."""

    engine: Engine

    def schedule_rows(self) -> dict[str, dict[str, Any]]:
        """Every schedule's row, by its run's key."""
        with self.engine.connect() as conn:
            return {r["run"]: dict(r) for r in conn.execute(select(SCHEDULES)).mappings()}

    def put_schedule(self, row: Mapping[str, Any], events: Iterable[Mapping[str, Any]] = ()) -> None:
        """Write a schedule's row whole (made, or changed), with ``events`` (rows of ``events``)."""
        s = SCHEDULES
        values = {k: v for k, v in row.items() if k != "run"}
        with self.engine.begin() as conn:
            if not conn.execute(update(s).where(s.c.run == row["run"]).values(**values)).rowcount:
                conn.execute(insert(s).values(run=row["run"], **values))
            rows = [dict(e) for e in events]
            if rows:
                conn.execute(insert(EVENTS), rows)
