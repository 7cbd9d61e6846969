"""``Store``: the control plane's database, one object (the facade over tables, mapping, sources).

Owns the transactions: every state change is one. An API write (create, update, delete a run; a
source's state or lock) is one, and a scheduling tick is one, whatever it changed:
``commit_tick`` writes its new workers, changed workers and runs, and events with bulk statements
(``executemany``), so a tick that admits a 10,000-copy array costs a handful of statements, not
10,000 round trips.

A run's ``resource_version`` comes from ONE counter for the whole store (as in Kubernetes), kept
in the ``astra_sequences`` table: every change of a run's document (its creation, an update) takes
the counter's next value in the same transaction, so versions only grow, survive a restart, and a
run deleted and created again under the same name never gets a version it had before (a plan saved
before the delete sees that it is stale). The scheduler's changes of state do not touch it.

Must not touch: the scheduler's decisions (it stores what they did to the records), processes,
HTTP. It never reads a clock: callers pass ``now``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import bindparam, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from ...migrate import MigrationError
from ..inventory import Inventory
from ..scheduler import RunRecord, WorkerRecord
from ..scopes import DEFAULT, shown
from .alerts import KeptAlerts
from .batch import BatchWrites
from .database import execute_many, insert_many, make_engine, redact
from .drives import KeptDrives
from .errors import NameExists, NotFound, Stale, StoreError
from .mapping import TickWrite, machine_json, run_record, run_values, tick_rows, worker_record
from .migrations import REVISIONS, prepare
from .migrations.legacy import fence
from .migrations.schema4 import RESOURCE_VERSION
from .schedules import KeptSchedules
from .secretbox import SecretBox
from .secrets import KeptSecrets
from .sources import KeptSources, compact
from .tables import CLUSTER_MACHINES, EVENTS, MACHINES, RUNS, SEQUENCES, WORKERS
from .teams import KeptTeams, write_audit
from .usage import KeptUsage, write_holds

__all__ = ["Audit", "Store"]

#: Audit events to record with a write, and how many each workspace keeps (``KeptTeams.add_audit``'s).
Audit = tuple[Sequence[Mapping[str, Any]], int]


class Store(
    BatchWrites, KeptSources, KeptTeams, KeptDrives, KeptSecrets, KeptUsage, KeptAlerts, KeptSchedules
):
    """One database. ``Store(url)`` brings it to this astra's schema (``migrations``) and is ready;
    ``secrets``: the key its secrets are sealed with (the server's: ``SecretBox.at(HOME/secrets.key)``;
    left out, a key in memory only, ``SecretBox.ephemeral``)."""

    def __init__(self, url: str, secrets: SecretBox | None = None) -> None:
        self.url = url
        self.secrets = secrets or SecretBox.ephemeral()
        try:
            self.engine = make_engine(url)
            prepare(self.engine, redact(url))
        except (SQLAlchemyError, MigrationError) as exc:
            raise StoreError(f"cannot open the database {redact(url)}: {exc}") from exc
        except ImportError as exc:  # a driver SQLAlchemy names in the URL (postgresql+psycopg2://…)
            what = f"its driver {exc.name} is not installed" if exc.name else str(exc)
            raise StoreError(f"cannot open the database {redact(url)}: {what}") from exc
        self._digest_texts = {}

    def close(self) -> None:
        self.engine.dispose()

    def schema_version(self) -> int:
        """The version in ``astra_schema`` (``migrations.FENCE``: what astras before alembic read)."""
        with self.engine.connect() as conn:
            found = fence(conn)
        assert found is not None  # prepare wrote it
        return found

    def revision(self) -> str:
        """The database's alembic revision (``migrations.HEAD`` once opened)."""
        from ...migrate import revision

        with self.engine.connect() as conn:
            found = revision(conn, REVISIONS)
        assert found is not None  # prepare wrote it
        return found

    # -- machines ----------------------------------------------------------------------------

    def save_inventory(self, inventory: Inventory, cluster: str = DEFAULT) -> None:
        """Replace the machines of ``cluster`` with ``inventory`` (one transaction): the default
        cluster's are the ``machines`` table, the others' ``cluster_machines``."""
        rows = [{"name": m.name, "spec": machine_json(m), "state": "Up"} for m in inventory]
        with self.engine.begin() as conn:
            if cluster == DEFAULT:
                conn.execute(delete(MACHINES))
                if rows:
                    conn.execute(insert(MACHINES), rows)
                return
            c = CLUSTER_MACHINES
            conn.execute(delete(c).where(c.c.cluster == cluster))
            if rows:
                conn.execute(insert(c), [{**r, "cluster": cluster} for r in rows])

    def machine_rows(self, cluster: str = DEFAULT) -> list[dict[str, Any]]:
        if cluster == DEFAULT:
            q = select(MACHINES.c.name, MACHINES.c.spec, MACHINES.c.state).order_by(MACHINES.c.name)
        else:
            c = CLUSTER_MACHINES
            q = select(c.c.name, c.c.spec, c.c.state).where(c.c.cluster == cluster).order_by(c.c.name)
        with self.engine.connect() as conn:
            rows = conn.execute(q).mappings()
            return [{"name": r["name"], "state": r["state"], **json.loads(r["spec"])} for r in rows]

    # -- runs --------------------------------------------------------------------------------

    def next_seq(self) -> int:
        with self.engine.connect() as conn:
            return (conn.execute(select(func.max(RUNS.c.seq))).scalar() or 0) + 1

    def resource_version(self) -> int:
        """The last resource_version given to any run (0: none yet)."""
        seq = SEQUENCES
        with self.engine.connect() as conn:
            return conn.execute(select(seq.c.value).where(seq.c.name == RESOURCE_VERSION)).scalar_one()

    def create_run(
        self, record: RunRecord, document: dict[str, Any], now: float, audit: Audit | None = None
    ) -> int:
        """Insert a new run, and with ``audit`` its audit events (one transaction: a run is never
        kept without its event, nor an event without its run); its resource_version, the store
        counter's next value. ``NameExists`` on a clash (the counter does not move then)."""
        values = {
            "name": record.name,
            "document": compact(document),
            "seq": record.seq,
            "created_at": now,
            "updated_at": now,
            **run_values(record),
        }
        try:
            with self.engine.begin() as conn:
                rv = _next_value(conn, RESOURCE_VERSION)
                insert_many(conn, RUNS, [{**values, "resource_version": rv}])
                if audit is not None:
                    write_audit(conn, *audit)
        except IntegrityError as exc:
            raise NameExists(f"a run named {shown(record.name)} exists") from exc
        return rv

    def update_run(self, name: str, document: dict[str, Any], expected: int | None, now: float) -> int:
        """Replace a run's document; its new resource_version (the store counter's next value).

        409-style ``Stale`` when ``expected`` is not current (the counter does not move then)."""
        with self.engine.begin() as conn:
            current = conn.execute(select(RUNS.c.resource_version).where(RUNS.c.name == name)).scalar()
            if current is None:
                raise NotFound(f"no run named {shown(name)}")
            if expected is not None and expected != current:
                raise Stale(
                    f"run {shown(name)} changed since it was read: resource_version {expected} is stale "
                    f"(now {current}); read it again",
                    current,
                )
            rv = _next_value(conn, RESOURCE_VERSION)
            conn.execute(
                update(RUNS)
                .where(RUNS.c.name == name)
                .values(
                    document=json.dumps(document, separators=(",", ":")), resource_version=rv, updated_at=now
                )
            )
        return rv

    def delete_run(self, name: str, audit: Audit | None = None) -> None:
        """Remove a run and its workers (its events stay), and with ``audit`` record its audit
        events; one transaction."""
        with self.engine.begin() as conn:
            gone = conn.execute(delete(RUNS).where(RUNS.c.name == name)).rowcount
            conn.execute(delete(WORKERS).where(WORKERS.c.run == name))
            if audit is not None and gone:
                write_audit(conn, *audit)
        if not gone:
            raise NotFound(f"no run named {shown(name)}")

    def run_rows(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(select(RUNS).order_by(RUNS.c.seq)).mappings()]

    def run_row(self, name: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(RUNS).where(RUNS.c.name == name)).mappings().first()
            return dict(row) if row else None

    def worker_rows(self, run: str | None = None) -> list[dict[str, Any]]:
        q = select(WORKERS)
        if run is not None:
            q = q.where(WORKERS.c.run == run)
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(q.order_by(WORKERS.c.run, WORKERS.c.rank)).mappings()]

    def worker_row(self, name: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(WORKERS).where(WORKERS.c.name == name)).mappings().first()
            return dict(row) if row else None

    def event_rows(self, run: str, last: int | None = None) -> list[dict[str, Any]]:
        """The run's events in order: every one, or its ``last`` ones."""
        if last is None:
            q = select(EVENTS).where(EVENTS.c.run == run).order_by(EVENTS.c.id)
        else:
            q = select(EVENTS).where(EVENTS.c.run == run).order_by(EVENTS.c.id.desc()).limit(last)
        with self.engine.connect() as conn:
            rows = [dict(r) for r in conn.execute(q).mappings()]
        return rows if last is None else rows[::-1]

    def event_count(self, run: str) -> int:
        """How many events the run has."""
        q = select(func.count()).select_from(EVENTS).where(EVENTS.c.run == run)
        with self.engine.connect() as conn:
            return int(conn.execute(q).scalar_one())

    def load(self) -> tuple[list[RunRecord], list[WorkerRecord], dict[str, dict[str, Any]]]:
        """Every run and worker as the scheduler's records, and each worker's process facts."""
        runs = [run_record(r) for r in self.run_rows()]
        rows = self.worker_rows()
        workers = [worker_record(r) for r in rows]
        procs = {r["name"]: {"pid": r["pid"], "pid_started": r["pid_started"], "log": r["log"]} for r in rows}
        return runs, workers, procs

    def save_records(self, runs: Iterable[RunRecord], workers: Iterable[WorkerRecord], now: float) -> None:
        """Write records changed outside a tick (recovery after a restart): one transaction."""
        self.commit_tick(TickWrite(now, [], list(workers), list(runs), [], {}))

    # -- a tick: one transaction, bulk statements --------------------------------------------

    def commit_tick(self, tick: TickWrite) -> None:
        rows = tick_rows(tick)
        try:
            with self.engine.begin() as conn:
                insert_many(conn, WORKERS, rows.new_workers)
                _update_by_name(conn, WORKERS, rows.workers)
                _update_by_name(conn, RUNS, rows.runs)
                execute_many(conn, _STARTED, rows.started)
                insert_many(conn, EVENTS, tick.events)
                if tick.holds:
                    write_holds(conn, tick.holds)
        except IntegrityError as exc:
            raise NameExists(f"a worker name is taken: {exc.orig}") from exc


#: A run's first start, kept: set once, by the tick that starts it.
_STARTED = (
    update(RUNS)
    .where(RUNS.c.name == bindparam("b_name"), RUNS.c.started_at.is_(None))
    .values(started_at=bindparam("started_at"))
)


def _update_by_name(conn: Any, table: Any, rows: list[dict[str, Any]]) -> None:
    """Update rows by ``b_name``: one ``executemany`` per set of columns changed."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r), []).append(r)
    for keys, batch in groups.items():
        execute_many(conn, _update_of(table, keys), batch)


@functools.lru_cache(maxsize=64)
def _update_of(table: Any, keys: tuple[str, ...]) -> Any:
    """The ``UPDATE`` of ``table``'s columns ``keys`` (but ``b_name``) in the row named ``b_name``."""
    values: dict[str, Any] = {c: bindparam(c) for c in keys if c != "b_name"}
    return update(table).where(table.c.name == bindparam("b_name")).values(values)


#: ``_next_value``'s statements, made once (SQLAlchemy builds a statement and its cache key in
#: Python each time one is made: with the audit trail's, half the Python of a created run's write)
_BUMP = update(SEQUENCES).where(SEQUENCES.c.name == bindparam("sequence")).values(value=SEQUENCES.c.value + 1)
_BUMP_RETURNING = _BUMP.returning(SEQUENCES.c.value)
_VALUE = select(SEQUENCES.c.value).where(SEQUENCES.c.name == bindparam("sequence"))


def _next_value(conn: Any, name: str) -> int:
    """Take the next value of sequence ``name`` inside the caller's transaction.

    One ``UPDATE … RETURNING`` (SQLite 3.35 and later, PostgreSQL): the write lock (SQLite) or
    the row lock (others) is taken by the statement that reads the value, so two writers never
    take the same value; where the database cannot return, the UPDATE comes first for the same
    reason, then the read."""
    which = {"sequence": name}
    if conn.dialect.update_returning:
        return conn.execute(_BUMP_RETURNING, which).scalar_one()
    conn.execute(_BUMP, which)
    return conn.execute(_VALUE, which).scalar_one()
