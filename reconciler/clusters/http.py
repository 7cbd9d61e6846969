"""``HttpCluster``: the ``Cluster`` protocol over the Astraeus REST API (CONTRACT §5), with httpx.

Any control plane that speaks the contract will do: ``astra server``, or a workspace's
``$WS_API`` (``…/api/v1/orgs/{org}/workspaces/{ws}/clusters/{cluster}/api``). A server URL
without ``/api`` in its path gets ``/api`` (the default org, workspace and cluster). Every call
carries ``Authorization: Bearer TOKEN`` when a token is given.

Answers map to the protocol's exceptions, always ``raise … from`` the httpx error:

=====================================  =======================================================
answer                                 exception
=====================================  =======================================================
no connection, timeout, 502/503/504    ``Unreachable`` (transient: the reconciler retries it)
404                                    ``NotFound``
409                                    ``Conflict``
422                                    ``Rejected`` (with the body's messages)
401, 403, anything else not 2xx        ``ClusterError`` (one line, with the server's detail)
=====================================  =======================================================

``ApiSourceStore`` is the client side of the control plane's ``/sources``: one small call per
write (an inventory entry, the status, an apply record; runs created and recorded many at once
with ``create_runs``, ``POST /runs:batch``), and a conditional GET
(``If-None-Match``) to read. A source name is percent-encoded whole in the path (``/`` too):
one path segment.

``list_run_summaries()`` is ``GET /runs?view=summary``: each run's status and the digest of its
normalised document, without the documents (``clusters.base.summaries`` uses it).

The shapes of the requests and answers are ``reconciler.wire.models``'s, the one statement of
them. The decoders (``clusters.decoders``: ``summary_of``, ``live_of``, ``worker_of``,
``holder_of``, ``errors_of``) read those shapes without pydantic: ``astra plan`` talks to the API on every run
and imports no pydantic (200 ms), and a decoder reads a 10,000-run summary listing faster than
a model would. They are the models' twins: ``tests/controlplane_api/test_wire_twins.py`` holds
each one to its model (it reads only the model's fields, and decodes what the model accepts to
the same values). They are lenient where the models are the server's word: another control
plane may leave a field out, or send a time as ISO 8601.

Pass ``transport=`` (``httpx.MockTransport``, ``httpx.ASGITransport`` of an app) to talk to a
server in-process: the same code path as over a socket.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection
from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from ..runs import Capacity
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
from ..wire import LOCK_HEADER, api_base
from .base import (
    ClusterError,
    Conflict,
    LiveRun,
    NotFound,
    Rejected,
    RunSummary,
    Unreachable,
    WorkerInfo,
)
from .decoders import (
    detail_of,
    errors_of,
    holder_of,
    items_of,
    live_of,
    summary_of,
    without_version,
    worker_of,
)

if TYPE_CHECKING:
    import httpx

__all__ = ["ApiSourceStore", "HttpCluster", "api_base"]

_TRANSIENT = frozenset({502, 503, 504})
#: Up to this many runs, an inventory read names them (``?run=…``); more: the whole inventory.
_RUNS_BY_NAME = 50


class HttpCluster:
    """The REST API as a ``Cluster`` (see the module docstring)."""

    def __init__(
        self,
        server: str,
        token: str | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 30.0,
        plain_gets: bool = False,
    ):
        self.address = server.rstrip("/")
        self.base = api_base(server)
        self._token, self._transport, self._timeout = token, transport, timeout
        #: a GET made before the httpx client is (``client``) goes plain when it can
        #: (``reconciler.plainhttp``), and is answered so when it succeeds (anything else is asked
        #: again through httpx, which says what is wrong): the read-ahead's copies, in a forked
        #: process that makes two reads and ends
        self._plain_gets = plain_gets

    @cached_property
    def client(self) -> httpx.Client:
        """The connection pool, made at the first call: httpx takes 80 ms to import and set up,
        which a cold plan spends while its files load (``reconcile.plan_source``)."""
        httpx = _httpx()
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        # plain http has no TLS: no certificate bundle to load (20 ms); redirects are not followed,
        # so every call stays on this scheme
        tls = urlsplit(self.base).scheme == "https"
        return httpx.Client(
            base_url=self.base, headers=headers, timeout=self._timeout, transport=self._transport, verify=tls
        )

    def close(self) -> None:
        if "client" in self.__dict__:  # made
            self.client.close()

    @property
    def reads_apart(self) -> bool:
        """Whether a forked process may call it: no connection is open yet that it would share,
        and no transport of this process (an app in-process, whose state it would copy)."""
        return self._transport is None and "client" not in self.__dict__

    def apart(self, *, plain_gets: bool = False) -> HttpCluster | None:
        """A copy that a forked process may call: the same server and token, none of this one's
        connections (the forked process leaves them alone and ends without closing them:
        ``cores.aside``), its GETs plain when ``plain_gets``; ``None`` with a transport of this
        process's."""
        if self._transport is not None:
            return None
        return HttpCluster(self.address, self._token, timeout=self._timeout, plain_gets=plain_gets)

    # ---- one call ----------------------------------------------------------------------------

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One call; a non-2xx answer is raised as the protocol's exception."""
        answered = self._plain_get(path, **kwargs) if self._plain_gets and method == "GET" else None
        if answered is not None:
            response: Any = answered
        else:
            httpx = _httpx()
            try:
                response = self.client.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                raise Unreachable(f"{self.address} cannot be reached: {exc or type(exc).__name__}") from exc
        if response.is_success or response.status_code == 304:  # 304: the If-None-Match still holds
            return response
        detail = detail_of(response)
        status = response.status_code
        try:
            response.raise_for_status()
        except httpx.HTTPStatusError as exc:
            if status in _TRANSIENT:
                raise Unreachable(f"{self.address} answered {status}: {detail}") from exc
            if status == 404:
                raise NotFound(detail) from exc
            if status == 409:
                raise Conflict(detail) from exc
            if status == 422:
                raise Rejected(f"the cluster refused the run: {detail}", errors_of(response)) from exc
            if status in (401, 403):
                hint = (
                    "give --token or ASTRA_TOKEN"
                    if status == 401
                    else "this token may not use this workspace"
                )
                raise ClusterError(f"{self.address} answered {status} ({detail}): {hint}") from exc
            raise ClusterError(f"{self.address} answered {status}: {detail}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _plain_get(self, path: str, params: Any = None, **rest: Any) -> Any:
        """``GET path`` on a socket (``plain_gets``): its answer when it succeeded; else ``None``
        (not made: a client is, a transport or other options are given, or the URL is not plain;
        or it failed), and the call is made through httpx. A server that does not answer in time
        is ``Unreachable`` at once, as httpx says it."""
        if rest or self._transport is not None or "client" in self.__dict__:
            return None
        from urllib.parse import urlencode

        from .. import plainhttp

        url = self.base + path + (f"?{urlencode(params)}" if params else "")
        if not plainhttp.plain(url):
            return None
        headers = {"Accept": "application/json"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        try:
            answer = plainhttp.get(url, headers, self._timeout)
        except TimeoutError as exc:  # asked again through httpx, it would wait as long again
            raise Unreachable(f"{self.address} cannot be reached: {exc or 'timed out'}") from exc
        except OSError:
            return None
        return answer if answer is not None and answer.is_success else None

    def _json(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError as exc:
            raise ClusterError(f"{self.address} answered with something that is not JSON") from exc

    # ---- the protocol ------------------------------------------------------------------------

    def list_runs(self) -> list[LiveRun]:
        data = self._json(self.request("GET", "/runs"))
        return sorted((live_of(r) for r in items_of(data, "runs")), key=lambda r: r.name)

    def list_run_summaries(self) -> list[RunSummary]:
        """``GET /runs?view=summary``: every run's status and spec digest, without documents. A
        server that ignores ``view`` answers with whole runs: their digests are computed here."""
        data = self._json(self.request("GET", "/runs", params={"view": "summary"}))
        out = []
        for item in items_of(data, "runs"):
            if isinstance(item, dict) and "metadata" in item and "spec_digest" not in item:
                out.append(RunSummary.of(live_of(item)))
            else:
                out.append(summary_of(item))
        return sorted(out, key=lambda r: r.name)

    def get_run(self, name: str) -> LiveRun | None:
        try:
            return live_of(self._json(self.request("GET", f"/runs/{quote(name, safe='')}")))
        except NotFound:
            return None

    def create_run(self, document: dict[str, Any]) -> LiveRun:
        return live_of(self._json(self.request("POST", "/runs", json=without_version(document))))

    def update_run(self, name: str, document: dict[str, Any], resource_version: int) -> LiveRun:
        body = without_version(document)
        body["metadata"] = {**body.get("metadata", {}), "resource_version": resource_version}
        return live_of(self._json(self.request("PUT", f"/runs/{quote(name, safe='')}", json=body)))

    def delete_run(self, name: str) -> None:
        self.request("DELETE", f"/runs/{quote(name, safe='')}")

    def workers(self, name: str) -> list[WorkerInfo]:
        data = self._json(self.request("GET", f"/runs/{quote(name, safe='')}/workers"))
        return [worker_of(w) for w in items_of(data, "workers")]

    def logs(self, worker: str) -> str:
        response = self.request("GET", f"/workers/{quote(worker, safe='')}/logs")
        if response.headers.get("content-type", "").startswith("application/json"):
            data = self._json(response)
            return data.get("logs", "") if isinstance(data, dict) else str(data)
        return response.text

    def events(self, name: str) -> list[dict[str, Any]]:
        """The run's events, in order (``GET /runs/{name}/events``): what ``astra describe`` shows."""
        data = self._json(self.request("GET", f"/runs/{quote(name, safe='')}/events"))
        return [e for e in items_of(data, "items") if isinstance(e, dict)]

    def worker_logs(self, worker: str, attempt: int | None = None, *, since: float | None = None) -> str:
        """A worker's output: of its latest attempt, or of ``attempt`` (``?attempt=N``); with
        ``since`` (seconds since the epoch), only its lines written then or later (``?since=T``)."""
        if attempt is None and since is None:
            return self.logs(worker)
        params = {k: v for k, v in (("attempt", attempt), ("since", since)) if v is not None}
        response = self.request("GET", f"/workers/{quote(worker, safe='')}/logs", params=params)
        return response.text

    def rerun(self, name: str, *, failed: bool = False) -> LiveRun:
        """``POST /runs/{name}/rerun``: the run that starts (the same, or ``<run>-rerun-<k>``)."""
        path = f"/runs/{quote(name, safe='')}/rerun"
        return live_of(self._json(self.request("POST", path, json={"failed": failed})))

    def capacity(self) -> Capacity | None:
        """What the cluster's machines hold (``GET /machines``); ``None`` when the API does not
        say (an Astraeus API without that route)."""
        try:
            data = self._json(self.request("GET", "/machines"))
        except (NotFound, Rejected):
            return None
        found = [m.get("gpus") for m in items_of(data, "machines") if isinstance(m, dict)]
        gpus = [g for g in found if isinstance(g, int) and not isinstance(g, bool)]
        return Capacity(max(gpus), sum(gpus), len(gpus)) if gpus else None

    def budget(self) -> dict[str, Any] | None:
        """The GPU-hour budget of this path's workspace (``clusters.budget``), or ``None``."""
        from .budget import budget_of

        return budget_of(self)

    def placement(self, documents: list[dict[str, Any]]) -> dict[str, dict[str, str]] | None:
        """``POST /runs:placement``: where each run would start now (``clusters.placement``)."""
        from .placement import placement_of

        return placement_of(self, documents)

    def plan_secrets(self, values: dict[str, bytes]) -> dict[str, tuple[str, list[str]]]:
        """``POST /secrets:plan``: what setting each value would do (``create``, ``update``,
        ``none``) and the runs not ended that read it, by name; the server compares, nothing is
        written."""
        import base64

        body = {"values": {k: base64.b64encode(v).decode() for k, v in values.items()}}
        answered = self._json(self.request("POST", "/secrets:plan", json=body))
        used = answered.get("used_by") or {}
        return {str(k): (str(v), list(used.get(k) or [])) for k, v in (answered.get("changes") or {}).items()}

    def set_secret(self, name: str, value: bytes) -> None:
        """``PUT /secrets/{name}``: the value as the raw body."""
        headers = {"Content-Type": "application/octet-stream"}
        self.request("PUT", f"/secrets/{quote(name, safe='')}", content=value, headers=headers)

    def source_store(self) -> ApiSourceStore:
        return ApiSourceStore(self)


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


# ---- reading answers ----------------------------------------------------------------------------


def _httpx() -> Any:
    """httpx, imported at the first call (a plan's files load meanwhile)."""
    import httpx

    return httpx
