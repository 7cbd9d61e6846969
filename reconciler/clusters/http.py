"""``HttpCluster``: the ``Cluster`` protocol over the Astraeus REST API (CONTRACT §5), with httpx.

Any control plane that speaks the contract will do: ``astra server``, or a workspace's
``$WS_API`` (``…/api/v1/orgs/{org}/workspaces/{ws}/clusters/{cluster}/api``). A server URL
without ``/api`` in its path gets ``/api`` (the default org, workspace and cluster). Every call
carries ``Authorization: Bearer TOKEN`` when a token is given.

Answers map to the protocol's exceptions, ``raise … from`` the httpx error when there is one (a
plain GET's answer, ``plain_gets``, has none):

=====================================  =======================================================
answer                                 exception
=====================================  =======================================================
no connection, timeout, 502/503/504    ``Unreachable`` (transient: the reconciler retries it)
404                                    ``NotFound``
409                                    ``Conflict``
422                                    ``Rejected`` (with the body's messages)
401, 403, anything else not 2xx        ``ClusterError`` (one line, with the server's detail)
=====================================  =======================================================

``source_store()`` is the client side of the control plane's ``/sources``
(``clusters.apisources.ApiSourceStore``, imported when asked for: the reads typed all day do
not use it).

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

from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from ..runs import Capacity
from ..wire import api_base
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
    briefs_of,
    detail_of,
    errors_of,
    items_of,
    live_of,
    related,
    summary_of,
    without_version,
    worker_fields,
    worker_of,
)

if TYPE_CHECKING:
    import httpx

    from .apisources import ApiSourceStore

__all__ = ["HttpCluster", "api_base"]

_TRANSIENT = frozenset({502, 503, 504})


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
        refused = self._refusal(response)
        if answered is not None:  # a plain answer (no httpx error to chain)
            raise refused
        try:
            response.raise_for_status()
        except httpx.HTTPStatusError as exc:
            raise refused from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _refusal(self, response: Any) -> ClusterError:
        """The protocol's exception for a non-2xx answer (see the module docstring's table)."""
        detail = detail_of(response)
        status = response.status_code
        if status in _TRANSIENT:
            return Unreachable(f"{self.address} answered {status}: {detail}")
        if status == 404:
            return NotFound(detail)
        if status == 409:
            return Conflict(detail)
        if status == 422:
            return Rejected(f"the cluster refused the run: {detail}", errors_of(response))
        if status in (401, 403):
            hint = "give --token or ASTRA_TOKEN" if status == 401 else "this token may not use this workspace"
            return ClusterError(f"{self.address} answered {status} ({detail}): {hint}")
        return ClusterError(f"{self.address} answered {status}: {detail}")

    def _plain_get(self, path: str, params: Any = None, **rest: Any) -> Any:
        """``GET path`` on a socket (``plain_gets``): its answer, whatever its status, when it was
        read whole; else ``None`` (not made: a client is, a transport or other options are given,
        or the URL is not plain; or it could not be read), and the call is made through httpx. A
        server that does not answer in time is ``Unreachable`` at once, as httpx says it."""
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
        return answer

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

    def list_run_briefs(self) -> list[dict[str, Any]] | None:
        """``GET /runs?view=brief``: what a listing shows of every run (``wire.briefs.RunBrief``,
        as dicts: ``astra get runs`` prints them as they come), without documents; ``None`` from
        a server that has no such view (a 422)."""
        try:
            data = self._json(self.request("GET", "/runs", params={"view": "brief"}))
        except Rejected:
            return None
        return briefs_of(data)

    def related_runs(self, *, depends_on: str | None = None, rerun_of: str | None = None) -> list[LiveRun]:
        """``GET /runs?depends_on=NAME`` (the runs that wait for run NAME), ``?rerun_of=NAME`` (its
        reruns): those runs whole, by name. A server that ignores the filters lists every run:
        the filters are kept here too."""
        params = {k: v for k, v in (("depends_on", depends_on), ("rerun_of", rerun_of)) if v is not None}
        data = self._json(self.request("GET", "/runs", params=params))
        return sorted(
            (r for r in map(live_of, items_of(data, "runs")) if related(r, **params)), key=lambda r: r.name
        )

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
        return [worker_of(w) for w in self._workers(name)]

    def worker_items(self, name: str) -> list[dict[str, Any]]:
        """``workers(name)`` as the fields of each ``WorkerInfo`` (``decoders.worker_fields``):
        what ``astra get workers`` prints, made without an object per worker."""
        return [worker_fields(w) for w in self._workers(name)]

    def _workers(self, name: str) -> list[Any]:
        return items_of(self._json(self.request("GET", f"/runs/{quote(name, safe='')}/workers")), "workers")

    def run_of_worker(self, worker: str) -> str | None:
        """The name of the run worker ``worker`` is of (``GET /workers/{worker}``), ``None`` when
        there is no such worker."""
        try:
            data = self._json(self.request("GET", f"/workers/{quote(worker, safe='')}"))
        except NotFound:
            return None
        found = data.get("run") if isinstance(data, dict) else None
        return found if isinstance(found, str) else None

    def workers_page(
        self, run: str, state: str | None = None, limit: int | None = None
    ) -> tuple[list[WorkerInfo], int, dict[str, int]]:
        """The first ``limit`` workers by rank of ``run`` in ``state`` (``GET /workers?run=&state=
        &limit=``), how many match on every page, and those by state."""
        params: dict[str, Any] = {"run": run}
        params |= {k: v for k, v in (("state", state), ("limit", limit)) if v is not None}
        data = self._json(self.request("GET", "/workers", params=params))
        items = [worker_of(w) for w in items_of(data, "workers") if isinstance(w, dict)]
        counts = data.get("task_counts") if isinstance(data, dict) else None
        total = data.get("total") if isinstance(data, dict) else None
        counts = {str(k): int(v) for k, v in counts.items()} if isinstance(counts, dict) else {}
        return items, int(total) if isinstance(total, int) else len(items), counts

    def events_tail(self, name: str, n: int) -> tuple[list[dict[str, Any]], int]:
        """The run's last ``n`` events and how many it has (``GET /runs/{name}/events?tail=N``; a
        server that ignores ``tail`` sends every one: the last are kept here)."""
        data = self._json(self.request("GET", f"/runs/{quote(name, safe='')}/events", params={"tail": n}))
        items = [e for e in items_of(data, "items") if isinstance(e, dict)]
        total = data.get("total") if isinstance(data, dict) else None
        return items[-n:], total if isinstance(total, int) else len(items)

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

    def worker_logs(
        self,
        worker: str,
        attempt: int | None = None,
        *,
        since: float | None = None,
        tail: int | None = None,
    ) -> str:
        """A worker's output: of its latest attempt, or of ``attempt`` (``?attempt=N``); with
        ``since`` (seconds since the epoch), only its lines written then or later (``?since=T``);
        with ``tail``, only the last ``tail`` of those lines, each ending at a newline
        (``?tail=N``: the server reads only the end of the log; one that ignores it sends the
        whole of it: the caller keeps the last lines)."""
        if attempt is None and since is None and tail is None:
            return self.logs(worker)
        params = {k: v for k, v in (("attempt", attempt), ("since", since), ("tail", tail)) if v is not None}
        response = self.request("GET", f"/workers/{quote(worker, safe='')}/logs", params=params)
        return response.text

    def rerun(self, name: str, *, failed: bool = False) -> LiveRun:
        """``POST /runs/{name}/rerun``: the run that starts (the same, or ``<run>-rerun-<k>``)."""
        path = f"/runs/{quote(name, safe='')}/rerun"
        return live_of(self._json(self.request("POST", path, json={"failed": failed})))

    def suspend_schedule(self, name: str, suspended: bool, reason: str = "") -> dict[str, Any]:
        """``PUT /runs/{name}/schedule/suspend`` (``DELETE`` to resume): the run's schedule."""
        path = f"/runs/{quote(name, safe='')}/schedule/suspend"
        if suspended:
            return self._json(self.request("PUT", path, json={"reason": reason}))
        return self._json(self.request("DELETE", path))

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

    def plan_secrets(
        self, values: dict[str, bytes], *, sealed: bool = False
    ) -> dict[str, tuple[str, list[str]]]:
        """``POST /secrets:plan``: what setting each value would do (``create``, ``update``,
        ``none``) and the runs not ended that read it, by name; the server compares, nothing is
        written. ``sealed``: the values are age files, which the server opens with its identity."""
        import base64

        body = {
            "sealed" if sealed else "values": {k: base64.b64encode(v).decode() for k, v in values.items()}
        }
        answered = self._json(self.request("POST", "/secrets:plan", json=body))
        used = answered.get("used_by") or {}
        return {str(k): (str(v), list(used.get(k) or [])) for k, v in (answered.get("changes") or {}).items()}

    def set_secret(self, name: str, value: bytes, *, sealed: bool = False) -> None:
        """``PUT /secrets/{name}``: the value as the raw body (``sealed``: an age file, which the
        server opens with its identity)."""
        headers = {"Content-Type": "application/age" if sealed else "application/octet-stream"}
        self.request("PUT", f"/secrets/{quote(name, safe='')}", content=value, headers=headers)

    def alert_rules(self) -> dict[str, dict[str, Any]]:
        """``GET /alerts``: the workspace's alerts' rules, by name (what a source's plan compares
        the alerts its astra.yaml declares with)."""
        answered = self._json(self.request("GET", "/alerts"))
        return {str(r["name"]): r for r in items_of(answered, "items") if isinstance(r, dict) and "name" in r}

    def put_alert(self, name: str, rule: dict[str, Any]) -> None:
        """``PUT /alerts/{name}``: create or replace an alert (its sink names secrets only)."""
        self.request("PUT", f"/alerts/{quote(name, safe='')}", json=rule)

    def delete_alert(self, name: str) -> None:
        """``DELETE /alerts/{name}``."""
        self.request("DELETE", f"/alerts/{quote(name, safe='')}")

    def source_store(self) -> ApiSourceStore:
        from .apisources import ApiSourceStore  # a plan's or an apply's: the reads leave it out

        return ApiSourceStore(self)


# ---- reading answers ----------------------------------------------------------------------------


def _httpx() -> Any:
    """httpx, imported at the first call (a plan's files load meanwhile)."""
    import httpx

    return httpx
