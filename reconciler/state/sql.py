"""Sources' state in a SQL database (``--state URL``): sqlmodel tables, SQLite by default.

Owns ``SqlSourceStore`` and its tables (``astra_sources``, ``astra_inventory``, ``astra_history``,
on a registry of their own). Opening brings the database to this astra's schema
(``reconciler.state.migrations``: alembic, with a fast path when it is already at the head).
Every method is one transaction; SQLAlchemy's errors leave as ``StateError``.

Must not touch: the control plane's database (its sources are ``reconciler.clusters.http``'s
business), how a store is chosen (``naming``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Table, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import registry
from sqlmodel import Column, Field, SQLModel, Text, create_engine

from ..migrate import MigrationError, engine_url, redact
from ..runspec.normalize import DIGEST_VERSION
from ..runspec.vocabulary import HISTORY_KEEP
from .suspension import SUSPENDED, keep_suspension
from .types import (
    HistoryEntry,
    InventoryEntry,
    Lock,
    Locked,
    SourceState,
    StateError,
    delete_refusal,
    digest_of,
)

__all__ = ["HistoryRow", "InventoryRow", "SourceRow", "SqlSourceStore", "StateTable", "metadata"]


class StateTable(SQLModel, registry=registry()):
    """The base of the source state's tables: their own metadata, apart from the control plane's."""


metadata = StateTable.metadata


class SourceRow(StateTable, table=True):
    """A source: its resource_version, its status (a JSON object) and its apply lock, if held."""

    __tablename__ = "astra_sources"
    name: str = Field(primary_key=True)
    resource_version: int
    status: str = Field(sa_column=Column(Text, nullable=False))
    lock_id: str | None = None
    lock_owner: str | None = None
    lock_created_at: float | None = None
    lock_host: str | None = None  # the process that took the lock (revision 0002_lock_process)
    lock_pid: int | None = None
    lock_started: str | None = None


class InventoryRow(StateTable, table=True):
    """One run of a source's inventory: its last-applied spec (JSON), when, which file, its digest."""

    __tablename__ = "astra_inventory"
    source: str = Field(primary_key=True)
    run: str = Field(primary_key=True)
    spec: str = Field(sa_column=Column(Text, nullable=False))
    applied_at: float
    file: str | None = None
    digest: str | None = None


class HistoryRow(StateTable, table=True):
    """One apply record of a source (the newest ``HISTORY_KEEP`` are read)."""

    __tablename__ = "astra_history"
    id: int | None = Field(default=None, primary_key=True)
    source: str = Field(index=True)
    who: str
    at: float
    git_commit: str | None = None
    summary: str = Field(sa_column=Column(Text, nullable=False))
    result: str = Field(sa_column=Column(Text, nullable=False))


#: The prefix of the digests of this astra's normalize (``DIGEST_VERSION``): an entry recorded
#: before its last bump gets its digest made again (and kept) when it is read.
_DIGESTS = f"{DIGEST_VERSION}:"
#: Runs named in one ``DELETE … IN``: below every database's bound on a statement's parameters
#: (SQLite's is 32,766 since 3.32, 999 before).
_RUNS_A_STATEMENT = 500


def _details(entry: HistoryEntry) -> dict[str, Any]:
    """An apply's details (revision, changes, note) ride in its summary's JSON, under
    ``details``: they have no column of their own (no migration for what only astra reads)."""
    details = entry.details()
    return {"details": details} if details else {}


def _history(row: Any) -> HistoryEntry:
    summary = json.loads(row["summary"])
    details = summary.pop("details", None) or {}
    return HistoryEntry.from_json(
        {
            **details,
            "who": row["who"],
            "when": row["at"],
            "commit": row["git_commit"],
            "summary": summary,
            "result": row["result"],
        }
    )


def _table(model: type[SQLModel]) -> Table:
    """The SQLAlchemy table a sqlmodel class maps (its ``__table__``, which sqlmodel leaves untyped)."""
    return cast(Table, vars(model)["__table__"])


class SqlSourceStore:
    """Sources in a SQL database through sqlmodel's engine: SQLite by default, any SQLAlchemy URL."""

    def __init__(self, url: str):
        from .migrations import prepare

        self.address = redact(url)
        if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
            try:
                Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StateError(f"cannot open the state database {url}: {exc.strerror or exc}") from exc
        self._sources = _table(SourceRow)
        self._inventory = _table(InventoryRow)
        self._history = _table(HistoryRow)
        try:
            self.engine = create_engine(engine_url(url))
            prepare(self.engine, self.address)
        except (SQLAlchemyError, MigrationError) as exc:
            raise StateError(f"cannot open the state database {self.address}: {exc}") from exc
        except ImportError as exc:  # a driver SQLAlchemy names in the URL (postgresql+psycopg2://…)
            what = f"its driver {exc.name} is not installed" if exc.name else str(exc)
            raise StateError(f"cannot open the state database {self.address}: {what}") from exc

    def _tx(self):
        return _Tx(self.engine)

    def _ensure(self, conn, name: str) -> None:
        if conn.execute(select(self._sources.c.name).where(self._sources.c.name == name)).first() is None:
            conn.execute(self._sources.insert().values(name=name, resource_version=0, status="{}"))

    def _bump(self, conn, name: str) -> None:
        s = self._sources
        conn.execute(s.update().where(s.c.name == name).values(resource_version=s.c.resource_version + 1))

    def read(self, name: str) -> SourceState:
        s, h = self._sources, self._history
        with self._tx() as conn:
            row = conn.execute(select(s).where(s.c.name == name)).mappings().first()
            if row is None:
                return SourceState(name)
            inventory = self._entries(conn, name, None, specs=True)
            history = [
                _history(r)
                for r in conn.execute(
                    select(h).where(h.c.source == name).order_by(h.c.id.desc()).limit(HISTORY_KEEP)
                ).mappings()
            ][::-1]
        return SourceState(
            name, row["resource_version"], inventory, _lock_of(row), json.loads(row["status"]), history
        )

    def inventory(
        self, name: str, runs: Collection[str] | None = None, *, specs: bool = True
    ) -> dict[str, InventoryEntry]:
        with self._tx() as conn:
            return self._entries(conn, name, runs, specs=specs)

    def _entries(
        self, conn, name: str, runs: Collection[str] | None, *, specs: bool
    ) -> dict[str, InventoryEntry]:
        i = self._inventory
        columns = [i.c.run, i.c.applied_at, i.c.file, i.c.digest]
        if specs:
            columns.append(i.c.spec)
        query = select(*columns).where(i.c.source == name).order_by(i.c.run)
        wanted = None if runs is None else set(runs)
        out = {}
        stale = []
        for r in conn.execute(query).mappings():
            if wanted is None or r["run"] in wanted:
                spec = json.loads(r["spec"]) if specs else None
                out[r["run"]] = InventoryEntry(spec, r["applied_at"], r["file"], r["digest"])
                if r["digest"] is not None and not r["digest"].startswith(_DIGESTS):
                    stale.append(r["run"])
        if stale:  # of an older normalize: made again, and kept
            held = select(i.c.run, i.c.spec).where(i.c.source == name, i.c.run.in_(stale))
            for run, spec in conn.execute(held).all():
                made = digest_of(json.loads(spec))
                conn.execute(i.update().where(i.c.source == name, i.c.run == run).values(digest=made))
                out[run] = replace(out[run], digest=made)
        return out

    def sources(self) -> list[SourceState]:
        with self._tx() as conn:
            names = [r[0] for r in conn.execute(select(self._sources.c.name).order_by(self._sources.c.name))]
        return [self.read(n) for n in names]

    def record(self, name: str, run: str, entry: InventoryEntry | None) -> None:
        self.record_all(name, {run: entry})

    def record_all(self, name: str, entries: Mapping[str, InventoryEntry | None]) -> None:
        """``record`` for many runs, in one transaction (a batch of creates): one ``DELETE`` a
        slice of runs and one ``INSERT`` of many rows (a statement a run cost 1.2 ms, 1.2 s of a
        Slurm apply of 1,000 runs)."""
        i = self._inventory
        runs = list(entries)
        rows = [
            {
                "source": name,
                "run": run,
                "spec": json.dumps(entry.spec, sort_keys=True),
                "applied_at": entry.applied_at,
                "file": entry.file,
                "digest": entry.digest or digest_of(entry.spec),
            }
            for run, entry in entries.items()
            if entry is not None
        ]
        with self._tx() as conn:
            self._ensure(conn, name)
            for at in range(0, len(runs), _RUNS_A_STATEMENT):
                some = runs[at : at + _RUNS_A_STATEMENT]
                conn.execute(i.delete().where(i.c.source == name, i.c.run.in_(some)))
            if rows:
                conn.execute(i.insert(), rows)
            self._bump(conn, name)

    def set_status(self, name: str, status: dict[str, Any]) -> None:
        self._status(name, lambda held: keep_suspension(held, status))

    def suspend(self, name: str, suspension: dict[str, Any] | None) -> None:
        def suspended(held: dict[str, Any]) -> dict[str, Any]:
            rest = {k: v for k, v in held.items() if k != SUSPENDED}
            return rest if suspension is None else {**rest, SUSPENDED: suspension}

        self._status(name, suspended)

    def suspension(self, name: str) -> dict[str, Any] | None:
        s = self._sources
        with self._tx() as conn:
            held = conn.execute(select(s.c.status).where(s.c.name == name)).scalar()
        value = json.loads(held).get(SUSPENDED) if held else None
        return value if isinstance(value, dict) else None

    def _status(self, name: str, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """Replace the status with ``change(held)``, in one transaction."""
        s = self._sources
        with self._tx() as conn:
            self._ensure(conn, name)
            held = conn.execute(select(s.c.status).where(s.c.name == name)).scalar()
            status = change(json.loads(held or "{}"))
            conn.execute(s.update().where(s.c.name == name).values(status=json.dumps(status, sort_keys=True)))
            self._bump(conn, name)

    def add_history(self, name: str, entry: HistoryEntry) -> None:
        h = self._history
        with self._tx() as conn:
            self._ensure(conn, name)
            conn.execute(
                h.insert().values(
                    source=name,
                    who=entry.who,
                    at=entry.when,
                    git_commit=entry.commit,
                    summary=json.dumps({**entry.summary, **_details(entry)}, sort_keys=True),
                    result=entry.result,
                )
            )
            self._bump(conn, name)

    def lock(self, name: str, who: str, now: float) -> Lock:
        s = self._sources
        lock = Lock.new(who, now)
        with self._tx() as conn:
            self._ensure(conn, name)
            taken = conn.execute(
                s.update()
                .where(s.c.name == name, s.c.lock_id.is_(None))
                .values(
                    lock_id=lock.id,
                    lock_owner=lock.owner,
                    lock_created_at=lock.created_at,
                    lock_host=lock.host,
                    lock_pid=lock.pid,
                    lock_started=lock.started,
                )
            ).rowcount
            if not taken:
                row = conn.execute(select(s).where(s.c.name == name)).mappings().first()
                holder = _lock_of(row) if row is not None else None
                if holder is not None:
                    raise Locked(name, holder, now)
        return lock

    def unlock(self, name: str, lock_id: str) -> None:
        s = self._sources
        with self._tx() as conn:
            released = conn.execute(
                s.update()
                .where(s.c.name == name, s.c.lock_id == lock_id)
                .values(
                    lock_id=None,
                    lock_owner=None,
                    lock_created_at=None,
                    lock_host=None,
                    lock_pid=None,
                    lock_started=None,
                )
            ).rowcount
        if not released:
            held = self.read(name).lock
            if held is None:
                raise StateError(f"source '{name}' holds no lock")
            raise StateError(f"source '{name}' is locked under {held.id}, not {lock_id}")

    def delete(self, name: str, *, keep_runs: bool = False) -> None:
        s, i, h = self._sources, self._inventory, self._history
        refused = delete_refusal(self.read(name), keep_runs)
        if refused:
            raise StateError(refused)
        with self._tx() as conn:  # the lock is checked again inside: an apply may take it meanwhile
            if conn.execute(s.delete().where(s.c.name == name, s.c.lock_id.is_(None))).rowcount:
                conn.execute(i.delete().where(i.c.source == name))
                conn.execute(h.delete().where(h.c.source == name))
                return
        refused = delete_refusal(self.read(name), keep_runs)
        raise StateError(refused or f"source '{name}' changed while it was deleted: try again")


class _Tx:
    """One transaction; SQLAlchemy's errors leave as ``StateError``."""

    def __init__(self, engine):
        self._cm = engine.begin()

    def __enter__(self):
        try:
            return self._cm.__enter__()
        except SQLAlchemyError as exc:
            raise StateError(f"the state database failed: {exc}") from exc

    def __exit__(self, *exc_info):
        try:
            return self._cm.__exit__(*exc_info)
        except SQLAlchemyError as exc:
            raise StateError(f"the state database failed: {exc}") from exc


def _lock_of(row) -> Lock | None:
    if row is None or row["lock_id"] is None:
        return None
    return Lock(
        row["lock_id"],
        row["lock_owner"] or "?",
        row["lock_created_at"] or 0.0,
        row["lock_host"],
        row["lock_pid"],
        row["lock_started"],
    )
