"""Sources' state in memory: the fake cluster's store, and tests'.

Owns ``MemorySourceStore``. Must not touch: files, databases, the network.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

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

__all__ = ["MemorySourceStore"]


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
        self.record_all(name, {run: entry})

    def record_all(self, name: str, entries: Mapping[str, InventoryEntry | None]) -> None:
        """``record`` for many runs, in one write (a batch of creates)."""
        data = self._get(name)
        for run, entry in entries.items():
            if entry is None:
                data["inventory"].pop(run, None)
            else:  # kept with its digest, as the other stores keep it: not made again at every read
                digest = entry.digest or digest_of(entry.spec)
                data["inventory"][run] = {**_copied(entry.to_json()), "digest": digest}
        self._bump(name, data)

    def set_status(self, name: str, status: dict[str, Any]) -> None:
        data = self._get(name)
        data["status"] = _copied(keep_suspension(data["status"], status))
        self._bump(name, data)

    def suspend(self, name: str, suspension: dict[str, Any] | None) -> None:
        data = self._get(name)
        status = {k: v for k, v in data["status"].items() if k != SUSPENDED}
        data["status"] = _copied(status if suspension is None else {**status, SUSPENDED: suspension})
        self._bump(name, data)

    def suspension(self, name: str) -> dict[str, Any] | None:
        held = (self._data.get(name) or {}).get("status", {}).get(SUSPENDED)
        return _copied(held) if held else None

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
        if data is None or not held:
            raise StateError(f"source '{name}' holds no lock")
        if held["id"] != lock_id:
            raise StateError(f"source '{name}' is locked under {held['id']}, not {lock_id}")
        data["lock"] = None

    def delete(self, name: str, *, keep_runs: bool = False) -> None:
        refused = delete_refusal(self.read(name), keep_runs)
        if refused:
            raise StateError(refused)
        del self._data[name]


def _copied(data: Any) -> Any:
    return json.loads(json.dumps(data))
