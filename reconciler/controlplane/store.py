"""The control plane's database: runs, workers, events, machines and sources, through sqlmodel.

Owns: the tables, the schema version (a database written by a newer astra refuses to open, with
a message saying so), the mapping between rows and the scheduler's records (``RunRecord``,
``WorkerRecord``), and the transactions. SQLite by default (a file, WAL mode, ``synchronous=FULL``
so that an acknowledged write survives a crash); any SQLAlchemy URL works.

A run's ``resource_version`` comes from ONE counter for the whole store (as in Kubernetes), kept
in the ``astra_sequences`` table: every change of a run's document (its creation, an update) takes
the counter's next value in the same transaction, so versions only grow, survive a restart, and a
run deleted and created again under the same name never gets a version it had before (a plan saved
before the delete sees that it is stale). The scheduler's changes of state do not touch it. A
source's resource_version is its own counter (1 at the first write, +1 per write): sources are
never deleted, so a source's name cannot be reused with an old version.

Every state change is one transaction: an API write (create, update, delete a run; a source's
state or lock) is one, and a scheduling tick is one, whatever it changed: ``commit_tick`` writes
its new workers, changed workers and runs, and events with bulk statements (``executemany``), so
a tick that admits a 10,000-copy array costs a handful of statements, not 10,000 round trips.

Must not touch: the scheduler's decisions (it stores what they did to the records), processes,
HTTP. It never reads a clock: callers pass ``now``.

Exceptions::

    StoreError              the database cannot be used (mapped from SQLAlchemy at the boundary)
    ├── SchemaTooNew        written by a newer astra: upgrade astra, or use another --db
    ├── NameExists          a run (or a worker name) of that name exists
    ├── NotFound            no such run, worker or source
    ├── Stale               the resource_version given is not the current one (holds ``current``)
    └── LockMismatch        a source write names a lock that is not the one held (holds ``lock``)
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from sqlalchemy import Index, bindparam, delete, event, func, insert, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlmodel import Column, Field, SQLModel, Text, create_engine

from reconciler.runspec.models import Run
from reconciler.runspec.normalize import digest, normalize

from ..runspec.vocabulary import FINAL_RUN_STATES, HISTORY_KEEP
from .inventory import Inventory, Machine
from .scheduler import Ask, RunRecord, RunState, WorkerRecord, WorkerState

__all__ = [
    "HISTORY_KEEP",
    "SCHEMA_VERSION",
    "EventRow",
    "LockMismatch",
    "MachineRow",
    "NameExists",
    "NotFound",
    "RunRow",
    "SchemaTooNew",
    "SchemaVersion",
    "SequenceRow",
    "SourceRow",
    "SourceRunRow",
    "Stale",
    "Store",
    "StoreError",
    "TickWrite",
    "WorkerRow",
    "default_url",
]

#: Bump when a table changes; a database with a higher number refuses to open. An older one is
#: brought up to date when opened (``_check_schema``: new tables, the counter seeded).
#: 2: the ``astra_sequences`` table (one resource_version counter for every run).
#: 3: a source's inventory as one ``source_runs`` row per (source, run); its status and history
#:    in columns of its ``sources`` row (migrated from the source's JSON when opened).
#: 4: each ``source_runs`` row's ``digest`` of its normalised spec (filled when opened).
SCHEMA_VERSION = 4


#: The sequence every run document change takes its resource_version from.
RESOURCE_VERSION = "resource_version"


class StoreError(Exception):
    """The database cannot do what was asked."""


class SchemaTooNew(StoreError):
    """The database was written by a newer astra: this one refuses to open it."""


class NameExists(StoreError):
    """A run of that name exists already."""


class NotFound(StoreError):
    """No run of that name."""


class Stale(StoreError):
    def __init__(self, message: str, current: int):
        super().__init__(message)
        self.current = current


class LockMismatch(StoreError):
    """A source write needs (or names) a lock that is not the one held (``lock``: the holder's, or None)."""

    def __init__(self, message: str, lock: dict[str, Any] | None):
        super().__init__(message)
        self.lock = lock


# ---- tables -------------------------------------------------------------------------------------


class SchemaVersion(SQLModel, table=True):
    __tablename__ = "astra_schema"
    id: int = Field(default=1, primary_key=True)
    version: int


class SequenceRow(SQLModel, table=True):
    """A named counter of the store: ``resource_version`` holds the last resource_version given."""

    __tablename__ = "astra_sequences"
    name: str = Field(primary_key=True)
    value: int = 0


class RunRow(SQLModel, table=True):
    """A run: the document as submitted, its resource_version, and the scheduler's record of it."""

    __tablename__ = "runs"
    name: str = Field(primary_key=True)
    document: str = Field(sa_column=Column(Text, nullable=False))  # JSON: {"metadata", "spec"}
    resource_version: int = 1
    seq: int = Field(index=True)
    state: str = RunState.PENDING.value
    reason: str = ""
    admitted: bool = False
    start: str = "Independent"
    on_failure: str = "RestartTask"
    restarts: int = 0
    not_before: float | None = None
    placed_at: float | None = None
    running_since: float | None = None
    cancel_requested: bool = False
    first_failure: str | None = None
    created_at: float
    updated_at: float
    started_at: float | None = None
    finished_at: float | None = None


class WorkerRow(SQLModel, table=True):
    """A worker: its place in the run, its state, and its current attempt (pid, log, times)."""

    __tablename__ = "workers"
    name: str = Field(primary_key=True)
    run: str = Field(index=True)
    rank: int
    world_size: int
    group: str | None = None
    group_rank: int | None = None
    ask: str = Field(sa_column=Column(Text, nullable=False))  # JSON of the scheduler's Ask
    state: str = WorkerState.PENDING.value
    reason: str = ""
    machine: str | None = None
    gpus: int = 0
    unhealthy_gpus: int = 0
    cpu_cores: int = 0
    memory_bytes: int = 0
    restarts: int = 0
    attempts: int = 0
    not_before: float | None = None
    placed_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    final: bool = False
    settled: bool = True
    pid: int | None = None
    pid_started: str | None = None  # the process's start time (Linux /proc), against pid reuse
    log: str | None = None
    image: str | None = None  # recorded by the local executor, not pulled


class EventRow(SQLModel, table=True):
    """What happened: every decision and observation, in order."""

    __tablename__ = "events"
    id: int | None = Field(default=None, primary_key=True)
    at: float
    run: str = Field(index=True)
    worker: str | None = None
    kind: str
    state: str | None = None
    reason: str | None = None
    machine: str | None = None
    exit_code: int | None = None


class MachineRow(SQLModel, table=True):
    __tablename__ = "machines"
    name: str = Field(primary_key=True)
    spec: str = Field(sa_column=Column(Text, nullable=False))  # JSON of the inventory's Machine
    state: str = "Up"


class SourceRow(SQLModel, table=True):
    """A reconcile source's own row: its status and history (JSON text), any other keys of its
    state (``data``, a JSON object), its resource_version and its apply lock. Its inventory is
    in ``source_runs``."""

    __tablename__ = "sources"
    name: str = Field(primary_key=True)
    data: str = Field(sa_column=Column(Text, nullable=False))
    resource_version: int = 0
    lock: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    updated_at: float
    status: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # JSON object
    history: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # JSON list


class SourceRunRow(SQLModel, table=True):
    """One run of a source's inventory: its last-applied spec (JSON text, served as is), when, which
    file, and the spec's digest (``_entry_digest``), computed once when the entry is written.

    The index holds every column but the spec: an inventory read without specs reads only it."""

    __tablename__ = "source_runs"
    __table_args__ = (Index("ix_source_runs_digests", "source", "run", "digest", "applied_at", "file"),)
    source: str = Field(primary_key=True)
    run: str = Field(primary_key=True)
    spec: str = Field(sa_column=Column(Text, nullable=False))
    applied_at: float
    file: str | None = None
    digest: str | None = None


_RUN_FIELDS = (
    "state",
    "reason",
    "admitted",
    "start",
    "on_failure",
    "restarts",
    "not_before",
    "placed_at",
    "running_since",
    "cancel_requested",
    "first_failure",
)
_WORKER_FIELDS = (
    "state",
    "reason",
    "machine",
    "gpus",
    "unhealthy_gpus",
    "cpu_cores",
    "memory_bytes",
    "restarts",
    "attempts",
    "not_before",
    "placed_at",
    "started_at",
    "ended_at",
    "exit_code",
    "final",
    "settled",
)


def default_url(home: str | os.PathLike[str]) -> str:
    """``sqlite:///HOME/astra.db``: the default database of a server whose home is ``home``."""
    return f"sqlite:///{Path(home).resolve() / 'astra.db'}"


# ---- records <-> rows ----------------------------------------------------------------------------


def _ask_json(ask: Ask) -> str:
    data = {
        "gpus": ask.gpus,
        "cpu_cores": ask.cpu_cores,
        "memory_bytes": ask.memory_bytes,
        "cpu_per_gpu": ask.cpu_per_gpu,
        "memory_per_gpu": ask.memory_per_gpu,
        "models": sorted(ask.models) if ask.models is not None else None,
        "min_memory_gb": ask.min_memory_gb,
        "healthy_only": ask.healthy_only,
    }
    return json.dumps(data, separators=(",", ":"))


def _ask_of(text: str) -> Ask:
    data = json.loads(text)
    models = data.pop("models")
    return Ask(models=frozenset(models) if models is not None else None, **data)


def run_record(row: Mapping[str, Any]) -> RunRecord:
    """The scheduler's record of a run row."""
    doc = json.loads(row["document"])
    return RunRecord(
        name=row["name"],
        run=Run.model_validate(doc),
        seq=row["seq"],
        submitted_at=row["created_at"],
        state=RunState(row["state"]),
        reason=row["reason"],
        admitted=row["admitted"],
        start=row["start"],
        on_failure=row["on_failure"],
        restarts=row["restarts"],
        not_before=row["not_before"],
        placed_at=row["placed_at"],
        running_since=row["running_since"],
        cancel_requested=row["cancel_requested"],
        first_failure=row["first_failure"],
    )


def worker_record(row: Mapping[str, Any]) -> WorkerRecord:
    w = WorkerRecord(
        row["name"],
        row["run"],
        row["rank"],
        row["world_size"],
        _ask_of(row["ask"]),
        row["group"],
        row["group_rank"],
    )
    for f in _WORKER_FIELDS:
        setattr(w, f, row[f])
    w.state = WorkerState(row["state"])
    return w


def _run_values(r: RunRecord) -> dict[str, Any]:
    out = {f: getattr(r, f) for f in _RUN_FIELDS}
    out["state"] = str(r.state)
    return out


def _worker_values(w: WorkerRecord) -> dict[str, Any]:
    out = {f: getattr(w, f) for f in _WORKER_FIELDS}
    out["state"] = str(w.state)
    return out


@dataclass
class TickWrite:
    """What one tick changed: written by ``Store.commit_tick`` in one transaction."""

    now: float
    new_workers: list[WorkerRecord]
    workers: list[WorkerRecord]
    runs: list[RunRecord]
    events: list[dict[str, Any]]
    #: Per-worker process facts from the executor: {name: {"pid", "pid_started", "log"}}.
    processes: dict[str, dict[str, Any]]


# ---- the store -----------------------------------------------------------------------------------


class Store:
    """One database. ``Store(url)`` creates the tables (or checks their version) and is ready."""

    def __init__(self, url: str) -> None:
        self.url = url
        try:
            self.engine = _engine(url)
            self._check_schema()
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot open the database {_redact(url)}: {exc}") from exc
        self.runs = RunRow.__table__
        #: each source's inventory without specs, as JSON text, at the resource_version it was
        #: read at (every inventory write moves it): what a warm plan asks for every time
        self._digest_texts: dict[str, tuple[int, str]] = {}
        self.workers = WorkerRow.__table__
        self.events = EventRow.__table__
        self.sources = SourceRow.__table__
        self.machines = MachineRow.__table__

    def close(self) -> None:
        self.engine.dispose()

    # -- schema ------------------------------------------------------------------------------

    def _check_schema(self) -> None:
        table = SchemaVersion.__table__
        with self.engine.begin() as conn:
            if self.engine.dialect.has_table(conn, table.name):
                found = conn.execute(select(table.c.version)).scalar()
                if found is not None and found > SCHEMA_VERSION:
                    raise SchemaTooNew(
                        f"the database {_redact(self.url)} has schema version {found}, newer than "
                        f"this astra's {SCHEMA_VERSION}: upgrade astra, or give another --db"
                    )
            SQLModel.metadata.create_all(conn)
            found = conn.execute(select(table.c.version)).scalar()
            if found is None:
                conn.execute(insert(table).values(id=1, version=SCHEMA_VERSION))
            elif found < SCHEMA_VERSION:
                if found < 3:
                    _split_sources(conn)
                if found < 4:
                    _digest_source_runs(conn)
                conn.execute(update(table).values(version=SCHEMA_VERSION))
            _ensure_sequence(conn)

    def schema_version(self) -> int:
        with self.engine.connect() as conn:
            return conn.execute(select(SchemaVersion.__table__.c.version)).scalar_one()

    # -- machines ----------------------------------------------------------------------------

    def save_inventory(self, inventory: Inventory) -> None:
        """Replace the machines table with ``inventory`` (one transaction)."""
        rows = [{"name": m.name, "spec": json.dumps(_machine_dict(m)), "state": "Up"} for m in inventory]
        with self.engine.begin() as conn:
            conn.execute(delete(self.machines))
            if rows:
                conn.execute(insert(self.machines), rows)

    def machine_rows(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(self.machines).order_by(self.machines.c.name)).mappings()
            return [{"name": r["name"], "state": r["state"], **json.loads(r["spec"])} for r in rows]

    # -- runs --------------------------------------------------------------------------------

    def next_seq(self) -> int:
        with self.engine.connect() as conn:
            return (conn.execute(select(func.max(self.runs.c.seq))).scalar() or 0) + 1

    def resource_version(self) -> int:
        """The last resource_version given to any run (0: none yet)."""
        seq = SequenceRow.__table__
        with self.engine.connect() as conn:
            return conn.execute(select(seq.c.value).where(seq.c.name == RESOURCE_VERSION)).scalar_one()

    def create_run(self, record: RunRecord, document: dict[str, Any], now: float) -> int:
        """Insert a new run (one transaction); its resource_version, the store counter's next value.

        ``NameExists`` on a clash (the counter does not move then)."""
        values = {
            "name": record.name,
            "document": json.dumps(document, separators=(",", ":")),
            "seq": record.seq,
            "created_at": now,
            "updated_at": now,
            **_run_values(record),
        }
        try:
            with self.engine.begin() as conn:
                rv = _next_value(conn, RESOURCE_VERSION)
                conn.execute(insert(self.runs).values(**values, resource_version=rv))
        except IntegrityError as exc:
            raise NameExists(f"a run named {record.name} exists") from exc
        return rv

    def update_run(self, name: str, document: dict[str, Any], expected: int | None, now: float) -> int:
        """Replace a run's document; its new resource_version (the store counter's next value).

        409-style ``Stale`` when ``expected`` is not current (the counter does not move then)."""
        with self.engine.begin() as conn:
            current = conn.execute(
                select(self.runs.c.resource_version).where(self.runs.c.name == name)
            ).scalar()
            if current is None:
                raise NotFound(f"no run named {name}")
            if expected is not None and expected != current:
                raise Stale(
                    f"run {name} changed since it was read: resource_version {expected} is stale "
                    f"(now {current}); read it again",
                    current,
                )
            rv = _next_value(conn, RESOURCE_VERSION)
            conn.execute(
                update(self.runs)
                .where(self.runs.c.name == name)
                .values(
                    document=json.dumps(document, separators=(",", ":")), resource_version=rv, updated_at=now
                )
            )
        return rv

    def delete_run(self, name: str) -> None:
        """Remove a run and its workers (its events stay); one transaction."""
        with self.engine.begin() as conn:
            gone = conn.execute(delete(self.runs).where(self.runs.c.name == name)).rowcount
            conn.execute(delete(self.workers).where(self.workers.c.run == name))
        if not gone:
            raise NotFound(f"no run named {name}")

    def run_rows(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(select(self.runs).order_by(self.runs.c.seq)).mappings()]

    def run_row(self, name: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(self.runs).where(self.runs.c.name == name)).mappings().first()
            return dict(row) if row else None

    def worker_rows(self, run: str | None = None) -> list[dict[str, Any]]:
        q = select(self.workers)
        if run is not None:
            q = q.where(self.workers.c.run == run)
        with self.engine.connect() as conn:
            return [
                dict(r) for r in conn.execute(q.order_by(self.workers.c.run, self.workers.c.rank)).mappings()
            ]

    def worker_row(self, name: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(self.workers).where(self.workers.c.name == name)).mappings().first()
            return dict(row) if row else None

    def event_rows(self, run: str) -> list[dict[str, Any]]:
        q = select(self.events).where(self.events.c.run == run).order_by(self.events.c.id)
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(q).mappings()]

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
        now = tick.now
        new_rows = []
        for w in tick.new_workers:
            row = {
                "name": w.name,
                "run": w.run,
                "rank": w.rank,
                "world_size": w.world_size,
                "group": w.group,
                "group_rank": w.group_rank,
                "ask": _ask_json(w.ask),
                **_worker_values(w),
                "pid": None,
                "pid_started": None,
                "log": None,
                "image": None,
            }
            row.update(tick.processes.get(w.name, {}))
            new_rows.append(row)
        new_names = {w.name for w in tick.new_workers}
        changed = []
        for w in tick.workers:
            if w.name in new_names:
                continue
            row = {"b_name": w.name, **_worker_values(w)}
            proc = tick.processes.get(w.name)
            row.update(proc if proc is not None else {})
            changed.append(row)
        run_rows = []
        for r in tick.runs:
            row = {"b_name": r.name, **_run_values(r), "updated_at": now}
            if r.state in FINAL_RUN_STATES:
                row["finished_at"] = now
            run_rows.append(row)
        try:
            with self.engine.begin() as conn:
                if new_rows:
                    conn.execute(insert(self.workers), new_rows)
                for keys, batch in _by_keys(changed):
                    stmt = (
                        update(self.workers)
                        .where(self.workers.c.name == bindparam("b_name"))
                        .values({c: bindparam(c) for c in keys if c != "b_name"})
                    )
                    conn.execute(stmt, batch)
                for keys, batch in _by_keys(run_rows):
                    stmt = (
                        update(self.runs)
                        .where(self.runs.c.name == bindparam("b_name"))
                        .values({c: bindparam(c) for c in keys if c != "b_name"})
                    )
                    conn.execute(stmt, batch)
                started = [
                    {"b_name": r.name, "started_at": r.running_since} for r in tick.runs if r.running_since
                ]
                if started:
                    stmt = (
                        update(self.runs)
                        .where(self.runs.c.name == bindparam("b_name"), self.runs.c.started_at.is_(None))
                        .values(started_at=bindparam("started_at"))
                    )
                    conn.execute(stmt, started)
                if tick.events:
                    conn.execute(insert(self.events), tick.events)
        except IntegrityError as exc:
            raise NameExists(f"a worker name is taken: {exc.orig}") from exc

    # -- sources -----------------------------------------------------------------------------
    #
    # A source is its own row (resource_version, lock, status, history, any other keys) and one
    # ``source_runs`` row per run of its inventory. Every write is one transaction and bumps the
    # source's resource_version (except the lock's, which the tag below covers). Reads assemble
    # the JSON text from the stored texts, without parsing the specs again; each entry's digest
    # is computed once, when it is written, and kept beside its spec.

    def _source_row(self, conn: Any, name: str) -> Mapping[str, Any] | None:
        return conn.execute(select(self.sources).where(self.sources.c.name == name)).mappings().first()

    def source_tag(self, name: str) -> str | None:
        """The source's entity tag (``"RV-LOCKID"``): it changes with every write and with the lock."""
        s = self.sources
        with self.engine.connect() as conn:
            row = conn.execute(select(s.c.resource_version, s.c.lock).where(s.c.name == name)).first()
        return None if row is None else _tag(row[0], row[1])

    def get_source_json(self, name: str) -> tuple[str, str] | None:
        """The whole source as JSON text and its tag; ``None`` when it was never written."""
        with self.engine.connect() as conn:
            row = self._source_row(conn, name)
            if row is None:
                return None
            text = _source_text(row, self._inventory_text(conn, name))
        return text, _tag(row["resource_version"], row["lock"])

    def get_source(self, name: str) -> dict[str, Any] | None:
        found = self.get_source_json(name)
        return None if found is None else json.loads(found[0])

    def list_sources_json(self) -> str:
        """``{"items": [SOURCE, ...]}`` (by name) as JSON text."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(self.sources).order_by(self.sources.c.name)).mappings().all()
            items = [_source_text(r, self._inventory_text(conn, r["name"])) for r in rows]
        return '{"items":[' + ",".join(items) + "]}"

    def list_sources(self) -> list[dict[str, Any]]:
        return json.loads(self.list_sources_json())["items"]

    def source_runs_json(
        self, name: str, *, specs: bool = True, runs: Iterable[str] | None = None
    ) -> tuple[str, str] | None:
        """``{"name", "resource_version", "items": {RUN: ENTRY}}`` as JSON text, and the tag;
        ``None`` when the source was never written. ``specs=False``: each ENTRY without its spec
        (the spec column is not read); ``runs``: only those runs' entries."""
        s = self.sources
        with self.engine.connect() as conn:
            row = conn.execute(select(s.c.resource_version, s.c.lock).where(s.c.name == name)).first()
            if row is None:
                return None
            held = self._digest_texts.get(name) if not specs and runs is None else None
            if held is not None and held[0] == row[0]:
                inventory = held[1]
            else:
                inventory = self._inventory_text(conn, name, specs=specs, runs=runs)
                if not specs and runs is None:
                    self._digest_texts[name] = (row[0], inventory)
        head = f'{{"name":{_str(name)},"resource_version":{row[0]},"items":'
        return head + inventory + "}", _tag(row[0], row[1])

    def _inventory_text(
        self, conn: Any, name: str, *, specs: bool = True, runs: Iterable[str] | None = None
    ) -> str:
        """``{RUN: ENTRY}`` (by run) as JSON text; ``specs=False``: no ``spec``; ``runs``: only those."""
        r = SourceRunRow.__table__
        spec = (r.c.spec,) if specs else ()
        q = select(r.c.run, r.c.digest, r.c.applied_at, r.c.file, *spec).where(r.c.source == name)
        if runs is not None:
            q = q.where(r.c.run.in_(list(runs)))
        parts = []
        for run, d, at, f, *given in conn.execute(q.order_by(r.c.run)).all():
            rest = f'"digest":{_str_or_null(d)},"applied_at":{_num(at)},"file":{_str_or_null(f)}}}'
            parts.append(f'{_str(run)}:{{"spec":{given[0]},{rest}' if given else f"{_str(run)}:{{{rest}")
        return "{" + ",".join(parts) + "}"

    def _write_source(
        self, conn: Any, name: str, now: float, lock_id: str | None, *, need_lock: bool, **values: Any
    ) -> int:
        """Check the lock, create the source's row if needed, set ``values`` and bump its version."""
        row = self._source_row(conn, name)
        held = json.loads(row["lock"]) if row is not None and row["lock"] else None
        if (need_lock or lock_id is not None) and (held is None or held.get("id") != lock_id):
            if held is None:
                why = f"source {name} is not locked" + (f": lock {lock_id} is not held" if lock_id else "")
            else:
                why = f"source {name} is locked under {held.get('id')}, not {lock_id or '(no lock given)'}"
            raise LockMismatch(why, held)
        if row is None:
            conn.execute(
                insert(self.sources).values(
                    **{"data": "{}", **values, "name": name, "resource_version": 1, "updated_at": now}
                )
            )
            return 1
        rv = row["resource_version"] + 1
        conn.execute(
            update(self.sources)
            .where(self.sources.c.name == name)
            .values(resource_version=rv, updated_at=now, **values)
        )
        return rv

    def put_source(
        self, name: str, data: dict[str, Any], expected: int | None, now: float, lock_id: str | None = None
    ) -> int:
        """Replace a source's whole state; ``expected`` is the resource_version read (0: create).

        ``data`` may hold ``inventory`` ({RUN: {"spec", "applied_at", "file"?}}, checked by the
        caller), ``status`` (an object), ``history`` (a list; the newest ``HISTORY_KEEP`` kept)
        and any other keys (kept as given). Returns the new resource_version."""
        rest = dict(data)
        inventory = rest.pop("inventory", None) or {}
        status = rest.pop("status", None)
        history = rest.pop("history", None)
        r = SourceRunRow.__table__
        with self.engine.begin() as conn:
            row = self._source_row(conn, name)
            current = row["resource_version"] if row else 0
            if expected is not None and expected != current:
                raise Stale(
                    f"source {name} changed since it was read: resource_version {expected} is stale "
                    f"(now {current}); read it again",
                    current,
                )
            rv = self._write_source(
                conn,
                name,
                now,
                lock_id,
                need_lock=False,
                data=_compact(rest),
                status=None if status is None else _compact(status),
                history=None if history is None else _compact(list(history)[-HISTORY_KEEP:]),
            )
            conn.execute(delete(r).where(r.c.source == name))
            if inventory:
                conn.execute(insert(r), [_run_row(name, run, e) for run, e in inventory.items()])
        return rv

    def put_source_run(
        self, name: str, run: str, entry: dict[str, Any], lock_id: str | None, now: float
    ) -> int:
        """Set one run's inventory entry (``{"spec", "applied_at", "file"?}``) under the lock ``lock_id``."""
        r = SourceRunRow.__table__
        values = _run_row(name, run, entry)
        with self.engine.begin() as conn:
            rv = self._write_source(conn, name, now, lock_id, need_lock=True)
            done = conn.execute(
                update(r)
                .where(r.c.source == name, r.c.run == run)
                .values({k: values[k] for k in ("spec", "applied_at", "file", "digest")})
            ).rowcount
            if not done:
                conn.execute(insert(r).values(**values))
        return rv

    def delete_source_run(self, name: str, run: str, lock_id: str | None, now: float) -> int:
        """Remove one run from the inventory under the lock ``lock_id``; ``NotFound`` when it is not there."""
        r = SourceRunRow.__table__
        with self.engine.begin() as conn:
            rv = self._write_source(conn, name, now, lock_id, need_lock=True)
            if not conn.execute(delete(r).where(r.c.source == name, r.c.run == run)).rowcount:
                raise NotFound(f"source {name} has no run {run} in its inventory")
        return rv

    def put_source_status(self, name: str, status: dict[str, Any], lock_id: str | None, now: float) -> int:
        """Replace the source's status; when ``lock_id`` is given, only under that lock."""
        with self.engine.begin() as conn:
            return self._write_source(conn, name, now, lock_id, need_lock=False, status=_compact(status))

    def add_source_history(self, name: str, entry: dict[str, Any], lock_id: str | None, now: float) -> int:
        """Append one apply record under the lock ``lock_id``; the newest ``HISTORY_KEEP`` are kept."""
        with self.engine.begin() as conn:
            row = self._source_row(conn, name)
            history = json.loads(row["history"]) if row is not None and row["history"] else []
            history = [*history, entry][-HISTORY_KEEP:]
            return self._write_source(conn, name, now, lock_id, need_lock=True, history=_compact(history))

    def lock_source(self, name: str, lock: dict[str, Any], now: float) -> tuple[bool, dict[str, Any], str]:
        """Take a source's lock: ``(True, lock, tag)``, or ``(False, the holder's lock, tag)`` when held."""
        with self.engine.begin() as conn:
            row = self._source_row(conn, name)
            if row is not None and row["lock"]:
                return False, json.loads(row["lock"]), _tag(row["resource_version"], row["lock"])
            text = json.dumps(lock, sort_keys=True)
            if row is None:
                conn.execute(
                    insert(self.sources).values(
                        name=name, data="{}", resource_version=0, lock=text, updated_at=now
                    )
                )
            else:
                conn.execute(update(self.sources).where(self.sources.c.name == name).values(lock=text))
        return True, lock, _tag(row["resource_version"] if row else 0, text)

    def unlock_source(self, name: str, lock_id: str | None) -> tuple[str, dict[str, Any] | None, str | None]:
        """Release a lock: ``("released"|"none"|"other", the lock released or held, the tag after)``."""
        with self.engine.begin() as conn:
            row = self._source_row(conn, name)
            if row is None or not row["lock"]:
                return "none", None, None if row is None else _tag(row["resource_version"], None)
            held = json.loads(row["lock"])
            if lock_id is not None and held.get("id") != lock_id:
                return "other", held, _tag(row["resource_version"], row["lock"])
            conn.execute(update(self.sources).where(self.sources.c.name == name).values(lock=None))
        return "released", held, _tag(row["resource_version"], None)


def _ensure_sequence(conn: Any) -> None:
    """Create the resource_version counter if missing, above every version a run holds.

    A database from before the counter (schema 1) gave each run its own versions from 1: starting
    the counter at their maximum keeps every later version above any earlier one still visible."""
    seq = SequenceRow.__table__
    if conn.execute(select(seq.c.value).where(seq.c.name == RESOURCE_VERSION)).scalar() is None:
        top = conn.execute(select(func.max(RunRow.__table__.c.resource_version))).scalar() or 0
        conn.execute(insert(seq).values(name=RESOURCE_VERSION, value=top))


def _next_value(conn: Any, name: str) -> int:
    """Take the next value of sequence ``name`` inside the caller's transaction.

    The UPDATE comes first so that it holds the write lock (SQLite) or the row lock (others)
    before the read: two writers never take the same value."""
    seq = SequenceRow.__table__
    conn.execute(update(seq).where(seq.c.name == name).values(value=seq.c.value + 1))
    return conn.execute(select(seq.c.value).where(seq.c.name == name)).scalar_one()


def _by_keys(rows: list[dict[str, Any]]) -> Iterable[tuple[tuple[str, ...], list[dict[str, Any]]]]:
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r), []).append(r)
    return groups.items()


_str = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]


def _num(x: float) -> str:
    """A number as JSON text (what ``json.dumps`` writes: a finite float's ``repr``)."""
    return repr(x) if math.isfinite(x) else json.dumps(x)


def _str_or_null(x: str | None) -> str:
    return "null" if x is None else _str(x)


def _compact(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"))


def _tag(resource_version: int, lock: str | None) -> str:
    """A source's entity tag: its resource_version and its lock's id (the lock is no write of the state)."""
    lock_id = json.loads(lock).get("id", "") if lock else ""
    return f'"{resource_version}-{lock_id}"'


def _run_row(source: str, run: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "source": source,
        "run": run,
        "spec": _compact(entry["spec"]),
        "applied_at": float(entry.get("applied_at") or 0.0),
        "file": entry.get("file"),
        "digest": _entry_digest(entry["spec"]),
    }


def _entry_digest(spec: Any) -> str | None:
    """``digest(normalize(spec))`` of an inventory entry's spec (the last-applied run document): what
    the client computes of a desired document and the server of a live one (``spec_digest``).
    ``None`` when normalize fails on the spec (not of a run document's shape), or it has no digest."""
    try:
        return digest(normalize(spec))
    except (AttributeError, TypeError, ValueError):
        return None


def _source_text(row: Mapping[str, Any], inventory: str) -> str:
    """A SOURCE as JSON text from its row's stored texts and its inventory's (no spec parsed again)."""
    head = (
        f'{{"name":{_str(row["name"])},"resource_version":{row["resource_version"]},'
        f'"lock":{row["lock"] or "null"},"status":{row["status"] or "{}"},"history":{row["history"] or "[]"},'
        f'"inventory":{inventory}'
    )
    data = (row["data"] or "{}").strip()
    return head + ("," + data[1:-1] if data not in ("{}", "") else "") + "}"


def _split_sources(conn: Any) -> None:
    """Bring sources written before schema 3 (one JSON object each) into the rows of schema 3.

    The ``status`` and ``history`` columns are added; each source's ``inventory`` (a map of run
    to ``{"spec", "applied_at", "file"}``, as astra writes it) becomes its ``source_runs`` rows,
    its ``status`` and ``history`` their columns; every other key stays in ``data``. An
    ``inventory`` of another shape is kept, as ``legacy_inventory``."""
    from sqlalchemy import inspect, text

    have = {c["name"] for c in inspect(conn).get_columns("sources")}
    for column in ("status", "history"):
        if column not in have:
            conn.execute(text(f"ALTER TABLE sources ADD COLUMN {column} TEXT"))
    s, r = SourceRow.__table__, SourceRunRow.__table__
    for name, raw in conn.execute(select(s.c.name, s.c.data)).all():
        try:
            data = json.loads(raw or "{}")
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        inventory = data.pop("inventory", None)
        status = data.pop("status", None)
        history = data.pop("history", None)
        rows = []
        if isinstance(inventory, dict) and all(
            isinstance(e, dict) and isinstance(e.get("spec"), dict) for e in inventory.values()
        ):
            rows = [_run_row(name, run, e) for run, e in inventory.items()]
        elif inventory is not None:
            data["legacy_inventory"] = inventory
        if status is not None and not isinstance(status, dict):
            data["legacy_status"], status = status, None
        if history is not None and not isinstance(history, list):
            data["legacy_history"], history = history, None
        conn.execute(
            update(s)
            .where(s.c.name == name)
            .values(
                data=_compact(data),
                status=None if status is None else _compact(status),
                history=None if history is None else _compact(history[-HISTORY_KEEP:]),
            )
        )
        conn.execute(delete(r).where(r.c.source == name))
        if rows:
            conn.execute(insert(r), rows)


def _digest_source_runs(conn: Any) -> None:
    """Bring ``source_runs`` written before schema 4 up to date: the ``digest`` column added,
    filled for every row that has none (``_entry_digest`` of its spec), and its index made."""
    from sqlalchemy import inspect, text

    if "digest" not in {c["name"] for c in inspect(conn).get_columns("source_runs")}:
        conn.execute(text("ALTER TABLE source_runs ADD COLUMN digest TEXT"))
    r = SourceRunRow.__table__
    rows = [
        {"b_source": source, "b_run": run, "digest": _entry_digest(json.loads(spec))}
        for source, run, spec in conn.execute(
            select(r.c.source, r.c.run, r.c.spec).where(r.c.digest.is_(None))
        )
    ]
    if rows:
        stmt = (
            update(r)
            .where(r.c.source == bindparam("b_source"), r.c.run == bindparam("b_run"))
            .values(digest=bindparam("digest"))
        )
        conn.execute(stmt, rows)
    for index in r.indexes:
        index.create(conn, checkfirst=True)


def _machine_dict(m: Machine) -> dict[str, Any]:
    return {f.name: getattr(m, f.name) for f in fields(Machine) if f.name != "name"}


def _redact(url: str) -> str:
    """A URL fit for a message: no password."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}"
    return url


def _engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        path = url.split(":///", 1)[1] if ":///" in url else ""
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record):
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=FULL")
            cur.execute("PRAGMA busy_timeout=5000")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True)
