"""Each source's memory: the inventory of runs it applied, their last-applied specs, its apply
lock, its reconcile status and its apply history.

Ownership lives here and nowhere else (never in labels a copy can carry): a run belongs to a
source exactly when it is in that source's inventory, and prune deletes only such runs.

Where it is kept (``open_store``):

* with the cluster, when the cluster keeps sources (``cluster.source_store()``: the control
  plane's ``/sources`` through ``reconciler.clusters.http.ApiSourceStore``; the fake cluster
  in memory), so that a CI runner and a laptop share one inventory and one lock;
* otherwise in a sqlmodel database, ``--state URL`` (``SqlSourceStore``); by default SQLite
  at ``$ASTRA_HOME/state.db``, else ``.astra/state.db``. An explicit ``--state`` wins.

A source's name (``default_source_name``): ``--source NAME``, else the git remote URL and the
folder's path in the repo (``https://github.com/acme/runs.git//examples``), else the folder's
absolute path.

The JSON shapes (the control plane's ``/sources`` API, CONTRACT §5, speaks exactly these; the
control plane keeps a source as its own row and one row per run of its inventory)::

    GET /sources/{name}  → 200, ETag "RV-LOCKID" (404: the source has no state yet, read as empty;
                           If-None-Match: the tag → 304: unchanged since)
      {"name": "…", "resource_version": 7,
       "inventory": {"RUN": ENTRY},
       "lock": null | {"id": "…", "owner": "user@host:pid", "created_at": 1700000000.0},
       "status": {"state": "Ready" | "Reconciling" | "Stalled", "reason": "ReconciliationSucceeded",
                  "message": "…", "step": "apply", "revision": "sha256…",
                  "observed_revision": "sha256…" | null, "updated_at": 1700000000.0},
       "history": [{"who": "user@host:pid", "when": 1700000000.0, "commit": "abc123…" | null,
                    "summary": {"create": 1, "update": 0, "replace": 0, "delete": 0, "noop": 3},
                    "result": "applied" | "failed: …"}]}      (oldest first, at most 100 kept)
      ENTRY = {"spec": {metadata, spec: normalised}, "applied_at": 1700000000.0,
               "file": "examples/sweep.yaml" | null,
               "digest": "n1:…"}  (answers only: the server's digest of the normalised spec,
                                   reconciler.runspec.normalize; computed here when missing)
    GET /sources         → 200 {"items": [the same objects, one per source, sorted by name]}
    GET /sources/{name}/runs     → 200 {"name", "resource_version", "items": {"RUN": ENTRY}}
                         ?view=digest: each ENTRY without "spec"; ?run=A&run=B: only those runs
                         (a server that ignores either answers more: the client filters)
    PUT /sources/{name}/runs/{run}   body ENTRY, X-Astra-Lock: LOCK_ID → 200 {"name", "resource_version"}
    DELETE /sources/{name}/runs/{run}  X-Astra-Lock: LOCK_ID → 200 {…} | 404 not in the inventory
    PUT /sources/{name}/status   body the status → 200 {"name", "resource_version"}
    POST /sources/{name}/history body one apply record, X-Astra-Lock: LOCK_ID → 201 {…}
                         (the inventory and history writes: 409 {"detail", "lock": the holder's or
                         null} unless LOCK_ID is the lock held; each write adds one to
                         resource_version, and answers with the source's new ETag)
    PUT /sources/{name}  body {"resource_version": 7, "inventory": …, "status": …, "history": …}
                         → 200 the new object (resource_version 8); 409 when 7 is stale
                           (0 creates the source). The lock is not part of a PUT. (The whole
                           state at once: astra itself writes granularly.)
    POST /sources/{name}/lock    body {"id": "…", "owner": "…", "created_at": …}
                         → 201 the lock taken; 409 {"detail": "…", "lock": the holder's lock}
    DELETE /sources/{name}/lock?id=ID
                         → 200/204 released; 409 {"detail", "lock"}: held under another id;
                           404: no lock held

Exceptions::

    StateError          the state cannot be read or written (mapped from sqlalchemy, httpx)
    ├── Locked          another apply holds the source's lock (carries the holder's ``Lock``)
    └── StaleState      the source changed since it was read (a concurrent writer)
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .runspec.vocabulary import HISTORY_KEEP

__all__ = [
    "HISTORY_KEEP",
    "HistoryEntry",
    "InventoryEntry",
    "KeepsSources",
    "Lock",
    "Locked",
    "MemorySourceStore",
    "SourceState",
    "SourceStore",
    "SqlSourceStore",
    "StaleState",
    "StateError",
    "astra_home",
    "default_source_name",
    "default_state_url",
    "git_commit",
    "open_store",
    "owner",
]


class StateError(Exception):
    """The source's state cannot be read or written."""


class Locked(StateError):
    def __init__(self, source: str, lock: Lock, now: float | None = None):
        self.lock = lock
        age = ""
        if now is not None:
            from .plan.cost import duration_words

            age = f", {duration_words(max(0.0, now - lock.created_at))} ago"
        super().__init__(
            f"source '{source}' is locked by {lock.owner} (lock {lock.id}{age}): another apply is running; "
            f"if it is not, clear the lock with 'astra force-unlock {lock.id} --source {source}'"
        )


class StaleState(StateError):
    """The state changed since it was read (another writer)."""


@dataclass(frozen=True)
class InventoryEntry:
    """A run this source applied: the document it last applied (normalised), when, from which
    file, and that document's digest (``reconciler.runspec.normalize.digest``).

    Every store fills ``digest`` when it reads (an entry made to be recorded may leave it out: the
    store computes it); read with ``inventory(…, specs=False)``, ``spec`` is ``None`` and the
    digest stands for it.
    """

    spec: dict[str, Any] | None
    applied_at: float
    file: str | None = None
    digest: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"spec": self.spec, "applied_at": self.applied_at, "file": self.file}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> InventoryEntry:
        spec, given = data.get("spec"), data.get("digest")
        return cls(spec, float(data.get("applied_at") or 0.0), data.get("file"), given or _digest_of(spec))

    def records(self, after: dict[str, Any], file: str | None) -> bool:
        """Whether this entry already records the normalised document ``after``, from ``file``."""
        if self.file != file:
            return False
        if self.spec is not None:
            return self.spec == after
        from .runspec.normalize import digest

        return self.digest is not None and self.digest == digest(after)

    def without_spec(self) -> InventoryEntry:
        return InventoryEntry(None, self.applied_at, self.file, self.digest or _digest_of(self.spec))


def _digest_of(spec: dict[str, Any] | None) -> str | None:
    """The digest of a last-applied spec (``None`` without one)."""
    if spec is None:
        return None
    from .runspec.normalize import spec_digest

    return spec_digest(spec)


@dataclass(frozen=True)
class Lock:
    id: str
    owner: str
    created_at: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Lock:
        return cls(str(data["id"]), str(data.get("owner", "?")), float(data.get("created_at") or 0.0))

    @classmethod
    def new(cls, who: str, now: float) -> Lock:
        import uuid

        return cls(uuid.uuid4().hex[:12], who, now)


@dataclass(frozen=True)
class HistoryEntry:
    who: str
    when: float
    commit: str | None
    summary: dict[str, int]
    result: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HistoryEntry:
        return cls(
            data.get("who", "?"),
            float(data.get("when") or 0.0),
            data.get("commit"),
            dict(data.get("summary") or {}),
            data.get("result", ""),
        )


@dataclass
class SourceState:
    name: str
    resource_version: int = 0
    inventory: dict[str, InventoryEntry] = field(default_factory=dict)
    lock: Lock | None = None
    status: dict[str, Any] = field(default_factory=dict)
    history: list[HistoryEntry] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "resource_version": self.resource_version,
            "inventory": {k: self.inventory[k].to_json() for k in sorted(self.inventory)},
            "lock": None if self.lock is None else self.lock.to_json(),
            "status": dict(sorted(self.status.items())),
            "history": [h.to_json() for h in self.history],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], name: str | None = None) -> SourceState:
        return cls(
            name=data.get("name") or name or "",
            resource_version=int(data.get("resource_version") or 0),
            inventory={k: InventoryEntry.from_json(v) for k, v in (data.get("inventory") or {}).items()},
            lock=Lock.from_json(data["lock"]) if data.get("lock") else None,
            status=dict(data.get("status") or {}),
            history=[HistoryEntry.from_json(h) for h in data.get("history") or []],
        )


@runtime_checkable
class SourceStore(Protocol):
    """Where sources' state lives. Every method is one read or one atomic write."""

    #: Where it is, for messages: ``sqlite:///.astra/state.db``, ``http://…/sources``.
    address: str

    def read(self, name: str) -> SourceState: ...

    def inventory(
        self, name: str, runs: Collection[str] | None = None, *, specs: bool = True
    ) -> dict[str, InventoryEntry]:
        """The source's inventory (only ``runs``, when given), each entry with its digest; with
        ``specs=False`` without the specs (``spec`` is ``None``), which a plan that finds a run
        unchanged by digest never reads."""

    def sources(self) -> list[SourceState]: ...

    def record(self, name: str, run: str, entry: InventoryEntry | None) -> None:
        """Set (or, with ``None``, remove) one run's inventory entry."""

    def set_status(self, name: str, status: dict[str, Any]) -> None: ...

    def add_history(self, name: str, entry: HistoryEntry) -> None: ...

    def lock(self, name: str, who: str, now: float) -> Lock:
        """Take the source's apply lock; ``Locked`` when another holds it."""

    def unlock(self, name: str, lock_id: str) -> None:
        """Release the lock ``lock_id``; ``StateError`` when no lock or another one is held."""


@runtime_checkable
class KeepsSources(Protocol):
    """A cluster that keeps sources' state with it (the control plane, the fake)."""

    def source_store(self) -> SourceStore | None: ...


# ---- in memory: the fake cluster's, and tests' ------------------------------------------------


class MemorySourceStore:
    """Sources in memory, kept as their JSON form (so that nothing is shared by reference).

    A write copies only what it changes (an entry, the status, a record), as the control plane's
    writes move only that: an apply of N runs is O(N), not O(N²)."""

    address = "memory://"

    def __init__(self) -> None:
        self._data: dict[str, dict[str, Any]] = {}

    def _get(self, name: str) -> dict[str, Any]:
        return self._data.setdefault(name, SourceState(name).to_json())

    def _bump(self, name: str, data: dict[str, Any]) -> None:
        data["resource_version"] += 1

    def read(self, name: str) -> SourceState:
        data = self._data.get(name)
        return SourceState(name) if data is None else SourceState.from_json(_copied(data))

    def inventory(
        self, name: str, runs: Collection[str] | None = None, *, specs: bool = True
    ) -> dict[str, InventoryEntry]:
        held = self.read(name).inventory
        wanted = held if runs is None else {r: held[r] for r in sorted(runs) if r in held}
        return wanted if specs else {r: e.without_spec() for r, e in wanted.items()}

    def sources(self) -> list[SourceState]:
        return [self.read(n) for n in sorted(self._data)]

    def record(self, name: str, run: str, entry: InventoryEntry | None) -> None:
        data = self._get(name)
        if entry is None:
            data["inventory"].pop(run, None)
        else:  # kept with its digest, as the other stores keep it: not made again at every read
            digest = entry.digest or _digest_of(entry.spec)
            data["inventory"][run] = {**_copied(entry.to_json()), "digest": digest}
        self._bump(name, data)

    def set_status(self, name: str, status: dict[str, Any]) -> None:
        data = self._get(name)
        data["status"] = _copied(status)
        self._bump(name, data)

    def add_history(self, name: str, entry: HistoryEntry) -> None:
        data = self._get(name)
        data["history"] = [*data["history"], _copied(entry.to_json())][-HISTORY_KEEP:]
        self._bump(name, data)

    def lock(self, name: str, who: str, now: float) -> Lock:
        data = self._get(name)
        if data["lock"]:
            raise Locked(name, Lock.from_json(data["lock"]), now)
        lock = Lock.new(who, now)
        data["lock"] = lock.to_json()
        return lock

    def unlock(self, name: str, lock_id: str) -> None:
        data = self._data.get(name)
        held = data.get("lock") if data else None
        if not held:
            raise StateError(f"source '{name}' holds no lock")
        if held["id"] != lock_id:
            raise StateError(f"source '{name}' is locked under {held['id']}, not {lock_id}")
        data["lock"] = None


def _copied(data: Any) -> Any:
    return json.loads(json.dumps(data))


# ---- SQL (sqlmodel): --state URL --------------------------------------------------------------


def _tables():
    """The tables, on a registry of their own (not the control plane's metadata)."""
    from sqlalchemy import Column, Float, Integer, MetaData, String, Table, Text

    meta = MetaData()
    sources = Table(
        "astra_sources",
        meta,
        Column("name", String, primary_key=True),
        Column("resource_version", Integer, nullable=False, default=0),
        Column("status", Text, nullable=False, default="{}"),
        Column("lock_id", String, nullable=True),
        Column("lock_owner", String, nullable=True),
        Column("lock_created_at", Float, nullable=True),
    )
    inventory = Table(
        "astra_inventory",
        meta,
        Column("source", String, primary_key=True),
        Column("run", String, primary_key=True),
        Column("spec", Text, nullable=False),
        Column("applied_at", Float, nullable=False),
        Column("file", String, nullable=True),
        Column("digest", String, nullable=True),  # added later: NULL in older files, filled on read
    )
    history = Table(
        "astra_history",
        meta,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("source", String, nullable=False, index=True),
        Column("who", String, nullable=False),
        Column("at", Float, nullable=False),
        Column("git_commit", String, nullable=True),
        Column("summary", Text, nullable=False),
        Column("result", Text, nullable=False),
    )
    return meta, sources, inventory, history


class SqlSourceStore:
    """Sources in a SQL database through sqlmodel's engine: SQLite by default, any SQLAlchemy URL."""

    def __init__(self, url: str):
        from sqlalchemy.exc import SQLAlchemyError
        from sqlmodel import create_engine

        self.address = url
        if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        self._meta, self._sources, self._inventory, self._history = _tables()
        try:
            self.engine = create_engine(url)
            self._meta.create_all(self.engine)
            self._add_digest_column()
        except SQLAlchemyError as exc:
            raise StateError(f"cannot open the state database {url}: {exc}") from exc

    def _add_digest_column(self) -> None:
        """A state file from before inventory digests gets the column, filled for its rows."""
        from sqlalchemy import inspect, select, text

        i = self._inventory
        if "digest" in {c["name"] for c in inspect(self.engine).get_columns(i.name)}:
            return
        with self.engine.begin() as conn:
            conn.execute(text(f"ALTER TABLE {i.name} ADD COLUMN digest VARCHAR"))
            for source, run, spec in conn.execute(select(i.c.source, i.c.run, i.c.spec)).all():
                done = i.update().where(i.c.source == source, i.c.run == run)
                conn.execute(done.values(digest=_digest_of(json.loads(spec))))

    def _tx(self):
        return _Tx(self.engine)

    def _ensure(self, conn, name: str) -> None:
        from sqlalchemy import select

        if conn.execute(select(self._sources.c.name).where(self._sources.c.name == name)).first() is None:
            conn.execute(self._sources.insert().values(name=name, resource_version=0, status="{}"))

    def _bump(self, conn, name: str) -> None:
        s = self._sources
        conn.execute(s.update().where(s.c.name == name).values(resource_version=s.c.resource_version + 1))

    def read(self, name: str) -> SourceState:
        from sqlalchemy import select

        s, h = self._sources, self._history
        with self._tx() as conn:
            row = conn.execute(select(s).where(s.c.name == name)).mappings().first()
            if row is None:
                return SourceState(name)
            inventory = self._entries(conn, name, None, specs=True)
            history = [
                HistoryEntry(r["who"], r["at"], r["git_commit"], json.loads(r["summary"]), r["result"])
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
        from sqlalchemy import select

        i = self._inventory
        columns = [i.c.run, i.c.applied_at, i.c.file, i.c.digest]
        if specs:
            columns.append(i.c.spec)
        query = select(*columns).where(i.c.source == name).order_by(i.c.run)
        wanted = None if runs is None else set(runs)
        out = {}
        for r in conn.execute(query).mappings():
            if wanted is None or r["run"] in wanted:
                spec = json.loads(r["spec"]) if specs else None
                out[r["run"]] = InventoryEntry(spec, r["applied_at"], r["file"], r["digest"])
        return out

    def sources(self) -> list[SourceState]:
        from sqlalchemy import select

        with self._tx() as conn:
            names = [r[0] for r in conn.execute(select(self._sources.c.name).order_by(self._sources.c.name))]
        return [self.read(n) for n in names]

    def record(self, name: str, run: str, entry: InventoryEntry | None) -> None:
        i = self._inventory
        with self._tx() as conn:
            self._ensure(conn, name)
            conn.execute(i.delete().where(i.c.source == name, i.c.run == run))
            if entry is not None:
                conn.execute(
                    i.insert().values(
                        source=name,
                        run=run,
                        spec=json.dumps(entry.spec, sort_keys=True),
                        applied_at=entry.applied_at,
                        file=entry.file,
                        digest=entry.digest or _digest_of(entry.spec),
                    )
                )
            self._bump(conn, name)

    def set_status(self, name: str, status: dict[str, Any]) -> None:
        s = self._sources
        with self._tx() as conn:
            self._ensure(conn, name)
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
                    summary=json.dumps(entry.summary, sort_keys=True),
                    result=entry.result,
                )
            )
            self._bump(conn, name)

    def lock(self, name: str, who: str, now: float) -> Lock:
        from sqlalchemy import select

        s = self._sources
        lock = Lock.new(who, now)
        with self._tx() as conn:
            self._ensure(conn, name)
            taken = conn.execute(
                s.update()
                .where(s.c.name == name, s.c.lock_id.is_(None))
                .values(lock_id=lock.id, lock_owner=lock.owner, lock_created_at=lock.created_at)
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
                .values(lock_id=None, lock_owner=None, lock_created_at=None)
            ).rowcount
        if not released:
            held = self.read(name).lock
            if held is None:
                raise StateError(f"source '{name}' holds no lock")
            raise StateError(f"source '{name}' is locked under {held.id}, not {lock_id}")


class _Tx:
    """One transaction; SQLAlchemy's errors leave as ``StateError``."""

    def __init__(self, engine):
        self._cm = engine.begin()

    def __enter__(self):
        from sqlalchemy.exc import SQLAlchemyError

        try:
            return self._cm.__enter__()
        except SQLAlchemyError as exc:
            raise StateError(f"the state database failed: {exc}") from exc

    def __exit__(self, *exc_info):
        from sqlalchemy.exc import SQLAlchemyError

        try:
            return self._cm.__exit__(*exc_info)
        except SQLAlchemyError as exc:
            raise StateError(f"the state database failed: {exc}") from exc


def _lock_of(row) -> Lock | None:
    if row is None or row["lock_id"] is None:
        return None
    return Lock(row["lock_id"], row["lock_owner"] or "?", row["lock_created_at"] or 0.0)


# ---- choosing and naming ----------------------------------------------------------------------


def astra_home(environ: dict[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ  # type: ignore[assignment]
    home = environ.get("ASTRA_HOME")
    return Path(home) if home else Path(".astra")


def default_state_url(environ: dict[str, str] | None = None) -> str:
    """SQLite at ``$ASTRA_HOME/state.db``, else ``.astra/state.db`` of the current directory."""
    return f"sqlite:///{astra_home(environ) / 'state.db'}"


def open_store(state: str | None, cluster: Any = None) -> SourceStore:
    """The store for ``--state`` (which wins), else the cluster's own, else the default SQLite."""
    if state:
        return SqlSourceStore(state)
    if isinstance(cluster, KeepsSources):
        kept = cluster.source_store()
        if kept is not None:
            return kept
    return SqlSourceStore(default_state_url())


def _git(folder: Path, *args: str) -> str | None:
    import subprocess

    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    out = done.stdout.strip()
    return out if done.returncode == 0 and out else None


def _folder_of(paths: Sequence[str | os.PathLike[str]]) -> Path:
    folders = [Path(p).resolve() for p in paths] or [Path.cwd()]
    folders = [p if p.is_dir() else p.parent for p in folders]
    return Path(os.path.commonpath([str(p) for p in folders]))


def default_source_name(paths: Sequence[str | os.PathLike[str]]) -> str:
    """The git remote URL and the folder's path in the repo, else the folder's absolute path."""
    folder = _folder_of(paths)
    top = _git(folder, "rev-parse", "--show-toplevel")
    remote = _git(folder, "config", "--get", "remote.origin.url") if top else None
    if top and remote:
        rel = os.path.relpath(folder, Path(top).resolve())
        return f"{remote}//{'' if rel == '.' else Path(rel).as_posix()}".rstrip("/")
    return str(folder)


def git_commit(paths: Iterable[str | os.PathLike[str]]) -> str | None:
    """The commit the files are at (``-dirty`` when the work tree differs), if they are in git."""
    folder = _folder_of(list(paths))
    head = _git(folder, "rev-parse", "HEAD")
    if head is None:
        return None
    dirty = _git(folder, "status", "--porcelain", "--", ".")
    return f"{head}-dirty" if dirty else head


def owner() -> str:
    """``user@host:pid``: who holds a lock, who applied."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except Exception:  # no user name in this environment
        user = "unknown"
    return f"{user}@{socket.gethostname()}:{os.getpid()}"
