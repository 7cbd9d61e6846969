"""``ApiSourceStore``: the client side of the control plane's ``/sources``, a ``SourceStore``.

One small call per write (an inventory entry, the status, an apply record; runs created and
recorded many at once with ``create_runs``, ``POST /runs:batch``), and a conditional GET
(``If-None-Match``) to read; a source name is percent-encoded whole in the path (``/`` too): one
path segment. It talks through its ``HttpCluster``'s ``request`` (``clusters.http``), whose
answers map to the protocol's exceptions.

Must not touch: the plan, the reconcile policy; the server's store (it is a client).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ..state import (
    HISTORY_KEEP,
    HistoryEntry,
    InventoryEntry,
    Lock,
    Locked,
    SourceState,
    StateError,
)
from ..state.suspension import keep_suspension
from ..state.types import delete_refusal
from ..wire import LOCK_HEADER
from .base import (
    ClusterError,
    Conflict,
    NotFound,
)
from .decoders import (
    holder_of,
    items_of,
)

if TYPE_CHECKING:
    import httpx

    from .http import HttpCluster

__all__ = ["ApiSourceStore"]

#: Up to this many runs, an inventory read names them (``?run=…``); more: the whole inventory.
_RUNS_BY_NAME = 50


class ApiSourceStore:
    """Sources kept by the control plane (``/sources``): a ``SourceStore``.

    Each write is one small call: ``record`` one ``PUT …/runs/{run}`` (a ``DELETE`` to forget),
    ``set_status`` one ``PUT …/status``, ``add_history`` one ``POST …/history``; the inventory
    writes and the history carry the lock this store took (``X-Astra-Lock``). ``read`` is one
    ``GET /sources/{name}`` with ``If-None-Match``: the server answers 304 when the source is as
    this store last knew it, which it knows after its own writes too (each answer's ETag is the
    source's tag after it: when that is the tag this write alone leads to, nobody else wrote in
    between, and the state kept is the server's). So a pass that changes one run moves one entry,
    not every run's last-applied spec. While this store holds the source's lock and the answer
    to its last call confirmed the state kept, ``read`` answers it without a call: the inventory
    and the history are written under the lock only (the status, which needs none, may be
    newer on the server; an apply reads the inventory under its lock). ``kept`` gives the state
    the last answer confirmed, without a call (a watch's pass, after its first status write).
    """

    def __init__(self, cluster: HttpCluster):
        self.cluster = cluster
        self.address = f"{cluster.base}/sources"
        #: each source as the server holds it, with its tag, as far as this store knows
        self._known: dict[str, tuple[str, SourceState]] = {}
        #: the lock this store holds on each source
        self._held: dict[str, str] = {}

    @property
    def reads_apart(self) -> bool:
        """Whether a forked process may read it: as its cluster (``HttpCluster.reads_apart``)."""
        return self.cluster.reads_apart

    def apart(self, *, plain_gets: bool = False) -> ApiSourceStore | None:
        """A store over ``HttpCluster.apart()`` (it knows no source and holds no lock)."""
        cluster = self.cluster.apart(plain_gets=plain_gets)
        return None if cluster is None else ApiSourceStore(cluster)

    def _path(self, name: str) -> str:
        return f"/sources/{quote(name, safe='')}"

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self.cluster.request(method, path, **kwargs)
        except (NotFound, Conflict):
            raise
        except ClusterError as exc:
            raise StateError(f"the source state at {self.address} cannot be used: {exc}") from exc

    def read(self, name: str) -> SourceState:
        known = self._known.get(name)
        if known is not None and name in self._held:
            return _copy(known[1])  # under this store's lock: as its last answer confirmed it
        headers = {"If-None-Match": known[0]} if known else {}
        try:
            response = self._call("GET", self._path(name), headers=headers)
        except NotFound:
            self._known.pop(name, None)
            return SourceState(name)
        if response.status_code == 304 and known is not None:
            return _copy(known[1])
        try:
            data = response.json()
        except ValueError as exc:
            raise StateError(f"{self.address} answered with something that is not JSON") from exc
        state = SourceState.from_json(data, name)
        tag = response.headers.get("etag")
        if tag:
            self._known[name] = (tag, state)
        else:
            self._known.pop(name, None)
        return _copy(state)

    def kept(self, name: str) -> SourceState | None:
        """The source as the answer to this store's last call on it confirmed it, without a call
        (``None`` when that answer did not: another writer came in between)."""
        known = self._known.get(name)
        return None if known is None else _copy(known[1])

    def inventory(
        self, name: str, runs: Collection[str] | None = None, *, specs: bool = True
    ) -> dict[str, InventoryEntry]:
        """``GET /sources/{name}/runs`` (``?view=digest`` without specs; ``?run=…`` for a few runs)."""
        params: list[tuple[str, str]] = [] if specs else [("view", "digest")]
        if runs is not None and len(runs) <= _RUNS_BY_NAME:
            params += [("run", r) for r in sorted(runs)]
        try:
            response = self._call("GET", f"{self._path(name)}/runs", params=params)
        except NotFound:
            return {}
        try:
            items = response.json()["items"]
            out = {r: InventoryEntry.from_json(e) for r, e in items.items() if runs is None or r in runs}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StateError(f"{self.address} answered with something that is not an inventory") from exc
        return out if specs else {r: e if e.spec is None else e.without_spec() for r, e in out.items()}

    def set_hook_secret(self, name: str, secret: str) -> None:
        """``PUT /sources/{name}/hook``: the secret that signs the source's webhook calls."""
        self._call("PUT", f"{self._path(name)}/hook", json={"secret": secret})

    def hook_count(self, name: str) -> int:
        """``GET /sources/{name}/hook``: how many signed webhook calls the source took."""
        try:
            return int(self._call("GET", f"{self._path(name)}/hook").json()["count"])
        except (ValueError, KeyError, TypeError) as exc:
            raise StateError(f"{self.address} answered with something that is not a webhook's state") from exc

    def tag(self, name: str) -> str | None:
        """The ETag of ``name`` as this store last read or wrote it (``None``: not known)."""
        known = self._known.get(name)
        return known[0] if known else None

    def sources(self) -> list[SourceState]:
        data = self._call("GET", "/sources").json()
        return sorted((SourceState.from_json(s) for s in items_of(data, "sources")), key=lambda s: s.name)

    def _write(
        self, name: str, method: str, path: str, change: Callable[[SourceState], None], **kwargs: Any
    ) -> httpx.Response:
        """One write; then the state kept is changed alike, if the answer's tag shows that this
        write was the only one since (else it is dropped, and the next read gets it whole)."""
        known = self._known.pop(name, None)
        lock_id = self._held.get(name)
        headers = {LOCK_HEADER: lock_id} if lock_id else {}
        try:
            response = self._call(method, path, headers=headers, **kwargs)
        except Conflict as exc:
            holder = holder_of(exc)
            mine = f"this store's lock {lock_id}" if lock_id else "no lock of this store's"
            whose = f"{holder.owner}'s lock {holder.id}" if holder else "no lock"
            raise StateError(
                f"source '{name}' refused the write ({exc}): it holds {whose}, the write {mine}"
            ) from exc
        if known is not None:
            state = known[1]
            state.resource_version += 1  # every write but the lock's adds one
            change(state)
            if response.headers.get("etag") == _tag_of(state):
                self._known[name] = (_tag_of(state), state)
        return response

    def record(self, name: str, run: str, entry: InventoryEntry | None) -> None:
        path = f"{self._path(name)}/runs/{quote(run, safe='')}"

        def change(state: SourceState) -> None:
            if entry is None:
                state.inventory.pop(run, None)
            else:
                state.inventory[run] = entry

        if entry is not None:
            self._write(name, "PUT", path, change, json=entry.to_json())
            return
        with contextlib.suppress(NotFound):  # not in the inventory: forgotten already, nothing written
            self._write(name, "DELETE", path, change)

    def create_runs(
        self,
        name: str,
        documents: list[dict[str, Any]],
        files: dict[str, str],
        applied_at: float,
        texts: list[bytes] | None = None,
    ) -> list[int] | None:
        """``POST /runs:batch`` (``clusters.batch``): the runs created and recorded in ``name``'s
        inventory in one write, under this store's lock; each document's status (``None``: no
        batch route). The state kept follows, as after ``_write``, when the tag shows it may.
        ``texts``: what is sent of each document (``batch.batch_texts``), when made already."""
        from .batch import create_batch

        known = self._known.pop(name, None)
        record = {"source": name, "applied_at": applied_at, "files": files}
        try:
            done = create_batch(
                self.cluster, documents, record=record, lock=self._held.get(name), texts=texts
            )
        except Conflict as exc:
            raise StateError(f"source '{name}' refused the write ({exc})") from exc
        if done is None:
            return None
        if known is not None and done.tag == _tag_of(done.recorded(known[1], documents, files, applied_at)):
            self._known[name] = (done.tag, known[1])
        return done.statuses

    def set_status(self, name: str, status: dict[str, Any]) -> None:
        def change(state: SourceState) -> None:
            state.status = keep_suspension(state.status, status)

        self._write(name, "PUT", f"{self._path(name)}/status", change, json=status)

    def suspend(self, name: str, suspension: dict[str, Any] | None) -> None:
        """``PUT /sources/{name}/suspend`` (``DELETE`` to resume): no lock is needed."""
        self._known.pop(name, None)
        if suspension is None:
            self._call("DELETE", f"{self._path(name)}/suspend")
        else:
            body = {"by": suspension.get("by", ""), "reason": suspension.get("reason", "")}
            self._call("PUT", f"{self._path(name)}/suspend", json=body)

    def suspension(self, name: str) -> dict[str, Any] | None:
        """``GET /sources/{name}/suspend``: the source's suspension, or ``None``."""
        try:
            held = self._call("GET", f"{self._path(name)}/suspend").json()["suspended"]
        except (ValueError, KeyError, TypeError) as exc:
            raise StateError(f"{self.address} answered with something that is not a suspension") from exc
        return held if isinstance(held, dict) else None

    def add_history(self, name: str, entry: HistoryEntry) -> None:
        def change(state: SourceState) -> None:
            state.history = [*state.history, entry][-HISTORY_KEEP:]

        self._write(name, "POST", f"{self._path(name)}/history", change, json=entry.to_json())

    def lock(self, name: str, who: str, now: float) -> Lock:
        wanted = Lock.new(who, now)
        known = self._known.pop(name, None)
        try:
            response = self._call("POST", f"{self._path(name)}/lock", json=wanted.to_json())
        except Conflict as exc:
            holder = holder_of(exc)
            raise Locked(name, holder or Lock("?", "another apply", now), now) from exc
        except NotFound as exc:
            raise StateError(
                f"{self.address} has no lock route for source '{name}' (404): the control plane must "
                "read the source name as a path ({name:path}), since names hold '/'"
            ) from exc
        data = response.json() if response.content else {}
        data = data.get("lock", data) if isinstance(data, dict) else {}
        lock = Lock.from_json(data) if data.get("id") else wanted
        self._held[name] = lock.id
        if known is not None:
            known[1].lock = lock
            if response.headers.get("etag") == _tag_of(known[1]):
                self._known[name] = (_tag_of(known[1]), known[1])
        return lock

    def unlock(self, name: str, lock_id: str) -> None:
        known = self._known.pop(name, None)
        if self._held.get(name) == lock_id:
            del self._held[name]
        try:
            response = self._call("DELETE", f"{self._path(name)}/lock", params={"id": lock_id})
        except NotFound as exc:
            raise StateError(f"source '{name}' holds no lock") from exc
        except Conflict as exc:
            holder = holder_of(exc)
            held = holder.id if holder else "another id"
            raise StateError(f"source '{name}' is locked under {held}, not {lock_id}") from exc
        if known is not None:
            known[1].lock = None
            if response.headers.get("etag") == _tag_of(known[1]):
                self._known[name] = (_tag_of(known[1]), known[1])

    def delete(self, name: str, *, keep_runs: bool = False) -> None:
        """``DELETE /sources/{name}``; the words are the other stores' (``delete_refusal``)."""
        self._known.pop(name, None)
        try:
            self._call("DELETE", self._path(name), params={"keep_runs": "true"} if keep_runs else {})
        except (NotFound, Conflict) as exc:
            refused = delete_refusal(self.read(name), keep_runs)
            raise StateError(refused or f"source '{name}' changed while it was deleted: try again") from exc


def _tag_of(state: SourceState) -> str:
    """The tag the control plane gives a source in this state (``"RV-LOCKID"``)."""
    return f'"{state.resource_version}-{state.lock.id if state.lock else ""}"'


def _copy(state: SourceState) -> SourceState:
    """A copy whose containers are its own (the entries are frozen; their specs are read only)."""
    return SourceState(
        state.name,
        state.resource_version,
        dict(state.inventory),
        state.lock,
        dict(state.status),
        list(state.history),
    )
