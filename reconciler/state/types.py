"""The data of a source's memory and the protocol of the stores that keep it.

Owns: ``InventoryEntry``, ``Lock``, ``HistoryEntry``, ``SourceState`` (with their JSON forms: the
field names are the ``/sources`` API's), the ``SourceStore`` protocol every store follows (memory,
SQL, the control plane's through ``reconciler.clusters.http``), ``KeepsSources`` (a cluster that
keeps sources), and the errors. Must not touch: any store's storage; no import beyond the
standard library, the spec layer and ``reconciler.processes`` (it is on the plan's path).

Exceptions::

    StateError          the state cannot be read or written (mapped from sqlalchemy, httpx)
    ├── Locked          another apply holds the source's lock (carries the holder's ``Lock``)
    ├── StaleState      the source changed since it was read (a concurrent writer)
    └── StateTooNew     the state database was written by a newer astra
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..runspec.quantities import duration_words

__all__ = [
    "HistoryEntry",
    "InventoryEntry",
    "KeepsSources",
    "Lock",
    "Locked",
    "SourceState",
    "SourceStore",
    "StaleState",
    "StateError",
    "StateTooNew",
    "delete_refusal",
    "digest_of",
]


class StateError(Exception):
    """The source's state cannot be read or written."""


class Locked(StateError):
    """Another apply holds the source's lock (``lock``); with ``now``, the message says its age.

    ``gone``: the holder is known to have ended (it ran on this host and its process, by pid and
    start time, runs no more: an apply killed or crashed); the message says so instead of
    "another apply is running". Both say how to clear the lock.
    """

    def __init__(self, source: str, lock: Lock, now: float | None = None):
        self.lock = lock
        self.gone = lock.holder_gone()
        age = "" if now is None else f", {duration_words(max(0.0, now - lock.created_at))} ago"
        clear = f"'astra force-unlock {lock.id} --source {source}'"
        if self.gone:
            text = (
                f"source '{source}' is locked by {lock.owner} (lock {lock.id}{age}), but that apply is "
                f"gone: process {lock.pid} no longer runs on {lock.host} (killed, or it crashed); "
                f"clear the lock with {clear}"
            )
        else:
            text = (
                f"source '{source}' is locked by {lock.owner} (lock {lock.id}{age}): another apply is "
                f"running; if it is not, clear the lock with {clear}"
            )
        super().__init__(text)


class StaleState(StateError):
    """The state changed since it was read (another writer)."""


class StateTooNew(StateError):
    """The state database was written by a newer astra: this one refuses to open it."""


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
        return cls(spec, float(data.get("applied_at") or 0.0), data.get("file"), given or digest_of(spec))

    def records(self, after: dict[str, Any], file: str | None) -> bool:
        """Whether this entry already records the normalised document ``after``, from ``file``."""
        if self.file != file:
            return False
        if self.spec is not None:
            return self.spec == after
        from ..runspec.normalize import digest

        return self.digest is not None and self.digest == digest(after)

    def without_spec(self) -> InventoryEntry:
        return InventoryEntry(None, self.applied_at, self.file, self.digest or digest_of(self.spec))


def digest_of(spec: dict[str, Any] | None) -> str | None:
    """The digest of a last-applied spec (``None`` without one)."""
    if spec is None:
        return None
    from ..runspec.normalize import spec_digest

    return spec_digest(spec)


@dataclass(frozen=True)
class Lock:
    """A source's apply lock: its id, who holds it (``user@host:pid``, for people), since when,
    and the process that took it (``host``, ``pid``, ``started``: ``reconciler.processes``), by
    which a lock left by a dead apply on this host is told from one held. The process fields are
    optional (a lock taken by an older astra has none) and left out of the JSON when unknown."""

    id: str
    owner: str
    created_at: float
    host: str | None = None
    pid: int | None = None
    started: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None or k in ("id", "owner", "created_at")}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Lock:
        host, pid, started = data.get("host"), data.get("pid"), data.get("started")
        return cls(
            str(data["id"]),
            str(data.get("owner", "?")),
            float(data.get("created_at") or 0.0),
            host if isinstance(host, str) else None,
            pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
            started if isinstance(started, str) else None,
        )

    @classmethod
    def new(cls, who: str, now: float) -> Lock:
        """A new lock taken by this process (its host, pid and start recorded)."""
        import uuid

        from ..processes import Process

        me = Process.this()
        return cls(uuid.uuid4().hex[:12], who, now, me.host, me.pid, me.started)

    def holder_gone(self) -> bool:
        """Whether the process that took the lock is known to have ended (reads /proc)."""
        if self.host is None or self.pid is None:
            return False
        from ..processes import Process

        return Process(self.host, self.pid, self.started).gone()


@dataclass(frozen=True)
class HistoryEntry:
    """One apply: who, when, at which commit, the plan's counts, the result; and its details
    (``DETAILS``, each left out when empty): ``revision`` (the plan's, ``Plan.revision``),
    ``changes`` (the runs by outcome: ``{"created": [...], ...}``, at most ``CHANGES_KEPT`` each)
    and ``note`` (a rollback, a force-push)."""

    who: str
    when: float
    commit: str | None
    summary: dict[str, int]
    result: str
    revision: dict[str, Any] | None = None
    changes: dict[str, list[str]] | None = None
    note: str = ""

    #: The keys of the details (in the JSON form beside the others).
    DETAILS = ("revision", "changes", "note")

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for key in self.DETAILS:
            if not out[key]:
                del out[key]
        return out

    def details(self) -> dict[str, Any]:
        return {k: v for k, v in self.to_json().items() if k in self.DETAILS}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HistoryEntry:
        return cls(
            data.get("who", "?"),
            float(data.get("when") or 0.0),
            data.get("commit"),
            {k: v for k, v in dict(data.get("summary") or {}).items() if isinstance(v, int)},
            data.get("result", ""),
            data.get("revision") if isinstance(data.get("revision"), dict) else None,
            data.get("changes") if isinstance(data.get("changes"), dict) else None,
            str(data.get("note") or ""),
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

    def set_status(self, name: str, status: dict[str, Any]) -> None:
        """Replace the status, keeping the suspension it holds (``suspension.keep_suspension``)."""

    def suspend(self, name: str, suspension: dict[str, Any] | None) -> None:
        """Set the source's suspension (``Suspension.to_json()``), or, with ``None``, resume it."""

    def suspension(self, name: str) -> dict[str, Any] | None:
        """The source's suspension, or ``None`` (one small read: a watch asks before each pass)."""

    def add_history(self, name: str, entry: HistoryEntry) -> None: ...

    def lock(self, name: str, who: str, now: float) -> Lock:
        """Take the source's apply lock; ``Locked`` when another holds it."""

    def unlock(self, name: str, lock_id: str) -> None:
        """Release the lock ``lock_id``; ``StateError`` when no lock or another one is held."""

    def delete(self, name: str, *, keep_runs: bool = False) -> None:
        """Forget the source (its inventory, status, history): ``StateError`` (``delete_refusal``'s
        words) when it holds nothing, holds its lock, or owns runs and ``keep_runs`` is false."""


def delete_refusal(state: SourceState, keep_runs: bool) -> str | None:
    """Why ``state`` may not be deleted, or ``None``: the words every store says."""
    if not (state.inventory or state.status or state.history or state.lock):
        return f"no source named '{state.name}'"
    if state.lock is not None:
        return (
            f"source '{state.name}' is locked by {state.lock.owner} (lock {state.lock.id}): an apply may "
            f"be running; 'astra force-unlock {state.lock.id}' clears a stale lock"
        )
    if state.inventory and not keep_runs:
        runs = sorted(state.inventory)
        shown = ", ".join(runs[:5]) + (", …" if len(runs) > 5 else "")
        return (
            f"source '{state.name}' owns {len(runs)} run{'s' if len(runs) != 1 else ''} ({shown}): "
            "prune them first, or give --keep-runs to leave them on the cluster, owned by no source"
        )
    return None


@runtime_checkable
class KeepsSources(Protocol):
    """A cluster that keeps sources' state with it (the control plane, the fake)."""

    def source_store(self) -> SourceStore | None: ...
