"""The control plane's REST API (FastAPI): CONTRACT §5, and the reconcile sources' state.

Owns: routes, authentication, and the JSON shapes below. Every route only composes: parse the
body, call the ``Engine`` (runs) or the ``Store`` (sources), render. Must not touch: scheduling
rules, SQL, processes.

Base paths (both serve everything below)::

    /api/v1/orgs/{org}/workspaces/{workspace}/clusters/{cluster}/api  ($WS_API)
    /api                                                              (the default org, workspace, cluster)

Every call needs ``Authorization: Bearer TOKEN``: 401 without it (or with another token), 403 when
the path names another org, workspace or cluster than the server's (``default``/``default``/
``default`` unless configured).
``GET /healthz`` (outside the API) answers without a token.

Runs (``/runs`` = ``/jobs``)::

    POST   /runs                   body: a run document → 201 RUN, Location: its URL
                                   409 {"detail"} when the name exists
                                   422 [{"path", "message"}]: exactly validate_data's messages
    GET    /runs                   200 {"items": [RUN, ...]} (in submission order)
    GET    /runs?view=summary      200 {"items": [SUMMARY, ...]} (in submission order): no documents,
                                   so a plan that finds nothing changed moves little
                                   (?view=full: as without it; any other view: 422)
    GET    /runs/{name}            200 RUN | 404 {"detail"}
    PUT    /runs/{name}            body: a run document with metadata.resource_version (the one
                                   read; left out: unconditional) → 200 RUN | 409 when stale | 422
    DELETE /runs/{name}            cancel (its processes are stopped now) and delete → 200 RUN as it ended
    GET    /runs/{name}/workers    (= /tasks) 200 {"items": [WORKER, ...],
                                   "readout": "Workers R running of N", "task_counts": {...}}
    GET    /runs/{name}/events     200 {"items": [{"at", "run", "worker", "kind", "state", "reason",
                                   "machine", "exit_code"}, ...]}: every decision and observation
    GET    /workers/{worker}       (= /tasks/{worker}) 200 WORKER
    GET    /workers/{worker}/logs  text/plain: the output of its latest attempt (``?attempt=N``: of that one)
    GET    /machines               200 {"items": [{"name", "state", "gpus", "gpu_model", ..., "free_gpus"}]}
    GET    /info                   200 {"org", "workspace", "cluster", "executor", "schema_version"}

    RUN    = {"metadata": {"name", "labels"?, "annotations"?, "resource_version"},
              "spec": the spec as submitted,
              "status": {"state", "reason", "created_at", "started_at", "finished_at" (epoch
                         seconds or null), "workers", "workers_running", "gpus_held", "restarts",
                         "readout", "workspace", "url"},
              "task_counts": {"Completed": 41, "Pending": 51, "Running": 8}}
    SUMMARY = {"name", "resource_version", "state" (as RUN's status.state),
               "spec_digest": "n1:" + sha256 hex of the canonical JSON (keys sorted, no spaces, UTF-8)
                              of reconciler.runspec.normalize.normalize({"metadata", "spec"}) of the
                              stored document, or null when it has none}
    WORKER = {"name", "run", "rank", "group", "state", "reason", "machine", "exit_code",
              "restarts", "attempts", "gpus", "cpu_cores", "memory_bytes", "placed_at",
              "started_at", "ended_at", "image"}

``resource_version`` comes from one counter for the whole store (as in Kubernetes): every change
of any run's document (POST, PUT) takes its next value, so it only grows, across restarts and
across a delete and re-create under the same name (a plan saved before that sees it is stale). The
scheduler's changes of state do not touch it, so a plan made while a run runs stays valid. A
source's resource_version is its own: 1 at its first write, one more with each write.

Sources (a reconcile source's memory, kept with the cluster; written by ``reconciler.state``).
The server keeps a source as its own row (resource_version, lock, status, history) and one row
per run of its inventory, so that an apply writes one small entry per run, never the whole
state::

    GET    /sources                200 {"items": [SOURCE, ...]} (by name)
    GET    /sources/{name}         200 SOURCE, ETag: "RV-LOCKID" | 404 {"detail"} when never written
                                   If-None-Match: that tag → 304, no body (nothing changed since)
    PUT    /sources/{name}         body {"resource_version": N, "inventory"?, "status"?, "history"?, ...}
                                   → 200 SOURCE (resource_version N+1): replaces the whole state;
                                   N is the one read (0, or left out, on the first write: create);
                                   409 {"detail", "resource_version": current} when stale;
                                   422 [{"path", "message"}] when inventory/status/history are not
                                   of the shapes below. "lock_id" (or X-Astra-Lock): as for the
                                   writes below, only when given.
    GET    /sources/{name}/runs    200 {"name", "resource_version", "items": {RUN: ENTRY}} (by run) | 404;
                                   ETag and If-None-Match → 304 as for GET /sources/{name}
                                   ?view=digest: {RUN: DIGEST} instead (no spec is read);
                                   ?view=full, or none: ENTRY; any other view: 422 {"detail"}
                                   ?run=A&run=B (repeatable, with either view): only those runs'
                                   entries (a name not in the inventory is simply absent)
    PUT    /sources/{name}/runs/{run}     body ENTRY → 200 WRITTEN; 422 when not an ENTRY
    DELETE /sources/{name}/runs/{run}     → 200 WRITTEN | 404 when the run is not in the inventory
    PUT    /sources/{name}/status  body: an object → 200 WRITTEN
    POST   /sources/{name}/history body: an apply record (object) → 201 WRITTEN; the newest 100 kept
    POST   /sources/{name}/lock    body: {"owner": "who@host", "id"?: "…"} → 201 LOCK
                                   409 {"detail": "source NAME is locked by OWNER since …", "lock": HOLDER}
    DELETE /sources/{name}/lock    ``?id=LOCK_ID`` (left out: force) → 204 | 404 not locked |
                                   409 {"detail", "lock": HOLDER} when the id is not the holder's

    SOURCE  = {"name", "resource_version", "lock": LOCK or null, "status": {...}, "history": [...],
               "inventory": {RUN: ENTRY}, ...any other keys a whole PUT gave}
    ENTRY   = {"spec": the last-applied run document (object),
               "digest": digest(normalize(spec)), made as SUMMARY's spec_digest is (equal
                         documents, equal digests), or null when the spec has none (normalize
                         fails on it, or it has no canonical form); made by the server when the
                         entry is written (a "digest" in a written ENTRY is ignored),
               "applied_at": epoch seconds, "file": "examples/sweep.yaml" or null}
    DIGEST  = {"digest", "applied_at", "file"}: an ENTRY without its spec
    WRITTEN = {"name", "resource_version"}, ETag: the source's tag after the write
    LOCK    = {"id", "owner", "created_at" (epoch seconds)}

The lock on granular writes: ``PUT``/``DELETE …/runs/{run}`` and ``POST …/history`` are made
under the apply lock and must name it, in the header ``X-Astra-Lock: LOCK_ID`` (or the query
parameter ``?lock=LOCK_ID``); when it is missing or not the lock held (another's, or none):
409 {"detail", "lock": HOLDER or null}. ``PUT …/status`` (the reconcile loop writes it between
applies) and a whole ``PUT`` need no lock, but are held to the same rule when they name one.
Every write but the lock's adds one to the source's resource_version; the tag (ETag) is the
resource_version and the lock's id, so it changes with every write and every lock taken or
released: a client that knows the tag after its own write keeps what it read.

A source's name may hold '/' (a git remote and a path), plain or as %2F. Sent percent-encoded
whole (astra does), it is one path segment and never read as a sub-resource; sent plain, a
trailing /lock, /runs, /runs/RUN, /status or /history is read as the sub-resource.
Large bodies (GET /runs, a SOURCE, its runs) are sent as JSON text put together from the stored
texts (json.dumps, never FastAPI's jsonable_encoder); a spec is stored as JSON text and served
as it is. A SUMMARY holds only what a plan reads of a run whose digests agree (about 100 bytes):
a plan of 10,000 unchanged runs moves about 1 MB.
"""

from __future__ import annotations

import hmac
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from reconciler.runspec.errors import InvalidSpec
from reconciler.runspec.normalize import spec_digest
from reconciler.runspec.validate import validate_data

from .clock import Clock
from .engine import Engine
from .scheduler import HOLDING, WorkerRecord, WorkerState, readout
from .store import LockMismatch, NameExists, NotFound, Stale, StoreError

__all__ = ["DEFAULT_SCOPE", "create_app"]

#: (org, workspace, cluster) of the local control plane.
DEFAULT_SCOPE = ("default", "default", "default")
LONG = "/api/v1/orgs/{org}/workspaces/{workspace}/clusters/{cluster}/api"
PREFIXES = ("/api", LONG)
SERVER_KEYS = frozenset({"name", "resource_version", "lock", "lock_id"})


class _Problem(Exception):
    def __init__(self, status: int, body: Any, headers: dict[str, str] | None = None):
        self.status, self.body, self.headers = status, body, headers


def _detail(status: int, text: str, **more: Any) -> _Problem:
    return _Problem(status, {"detail": text, **more})


def create_app(
    engine: Engine,
    token: str,
    clock: Clock,
    *,
    scope: tuple[str, str, str] = DEFAULT_SCOPE,
    on_change: Callable[[], None] = lambda: None,
    executor_name: str = "process",
) -> FastAPI:
    """The API over ``engine``; ``on_change`` is called after a write (to wake the scheduler)."""
    app = FastAPI(title="Astraeus (astra's embedded control plane)", docs_url=None, redoc_url=None)
    org, workspace, cluster = scope

    @app.exception_handler(_Problem)
    async def _problem(_request: Request, exc: _Problem) -> Response:
        return JSONResponse(exc.body, status_code=exc.status, headers=exc.headers)

    @app.exception_handler(StoreError)
    async def _store(_request: Request, exc: StoreError) -> Response:
        return JSONResponse({"detail": str(exc)}, status_code=503)

    def authorize(request: Request) -> None:
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), token.encode()):
            what = "a wrong token" if given else "no token"
            raise _Problem(
                401,
                {"detail": f"{what}: send 'Authorization: Bearer TOKEN'"},
                {"WWW-Authenticate": "Bearer"},
            )
        p = request.path_params
        if "org" in p and (p["org"], p["workspace"], p["cluster"]) != scope:
            raise _detail(
                403,
                f"this token is for workspace {workspace} of org {org} on cluster {cluster}, not "
                f"workspace {p['workspace']} of org {p['org']} on cluster {p['cluster']}",
            )

    def route(paths: list[str], methods: list[str], status: int = 200):
        def wrap(handler):
            async def endpoint(request: Request):
                authorize(request)
                own = {
                    k: v for k, v in request.path_params.items() if k not in ("org", "workspace", "cluster")
                }
                return await handler(request, **own)

            for prefix in PREFIXES:
                for path in paths:
                    app.add_api_route(prefix + path, endpoint, methods=methods, status_code=status)
            return handler

        return wrap

    def run_url(request: Request, name: str) -> str:
        root = str(request.base_url).rstrip("/")
        return f"{root}/api/v1/orgs/{org}/workspaces/{workspace}/clusters/{cluster}/api/runs/{name}"

    # -- views ---------------------------------------------------------------------------------

    def run_json(name: str, request: Request, root: str | None = None) -> dict[str, Any]:
        """A RUN; ``root``: the runs' URL prefix (``run_url(request, "")``), when known already."""
        s = engine.state
        r = s.runs[name]
        meta = engine.meta[name]
        ws = s.workers_of(name)
        running = sum(1 for w in ws if w.state is WorkerState.RUNNING)
        counts = s.task_counts(name)
        if not r.admitted and r.run.spec.array is not None:
            counts = {"Pending": r.run.spec.array.size}
        total = len(ws) or sum(counts.values())
        return {
            "metadata": {**meta.document["metadata"], "resource_version": meta.resource_version},
            "spec": meta.document["spec"],
            "status": {
                "state": str(r.state),
                "reason": r.reason,
                "created_at": meta.created_at,
                "started_at": meta.started_at,
                "finished_at": meta.finished_at,
                "workers": total,
                "workers_running": running,
                "gpus_held": sum(w.gpus for w in ws if w.state in HOLDING),
                "restarts": r.restarts,
                "readout": readout(running, total),
                "workspace": workspace,
                "url": root + name if root is not None else run_url(request, name),
            },
            "task_counts": counts,
        }

    def worker_json(w: WorkerRecord) -> dict[str, Any]:
        proc = engine.processes.get(w.name) or {}
        return {
            "name": w.name,
            "run": w.run,
            "rank": w.rank,
            "group": w.group,
            "state": str(w.state),
            "reason": w.reason,
            "machine": w.machine if w.state is not WorkerState.PENDING else None,
            "exit_code": w.exit_code,
            "restarts": w.restarts,
            "attempts": w.attempts,
            "gpus": w.gpus,
            "cpu_cores": w.cpu_cores,
            "memory_bytes": w.memory_bytes,
            "placed_at": w.placed_at,
            "started_at": w.started_at,
            "ended_at": w.ended_at,
            "image": proc.get("image") or engine.state.template(w).image,
        }

    def the_run(name: str) -> None:
        if name not in engine.state.runs:
            raise _detail(404, f"no run named {name}")

    def the_worker(name: str) -> WorkerRecord:
        w = engine.state.workers.get(name)
        if w is None:
            raise _detail(404, f"no worker named {name}")
        return w

    async def body_of(request: Request) -> Any:
        raw = await request.body()
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise _Problem(422, [{"path": "", "message": f"the body is not JSON: {exc}"}]) from exc

    def checked(doc: Any) -> dict[str, Any]:
        errors = validate_data(doc)
        problems = [{"path": str(e.path), "message": e.message} for e in errors]
        if isinstance(doc, dict) and "template" in doc and not problems:
            problems.append(
                {
                    "path": "template",
                    "message": "the cluster takes final run specs: render the template first "
                    "(astra template render, or astra apply)",
                }
            )
        if problems:
            raise _Problem(422, problems)
        return doc

    # -- runs ----------------------------------------------------------------------------------

    @route(["/runs", "/jobs"], ["POST"], 201)
    async def create_run(request: Request):
        doc = checked(await body_of(request))
        name = doc["metadata"]["name"]
        try:
            engine.submit(doc, clock.now())
        except NameExists as exc:
            raise _detail(409, str(exc)) from exc
        on_change()
        digest_of(name)  # made with the document, not by the first plan that lists 10,000 runs
        body = run_json(name, request)
        return JSONResponse(body, status_code=201, headers={"Location": body["status"]["url"]})

    #: each run's spec as JSON text, at the resource_version it was made for (a spec changes
    #: only with its document): the list sends it as it is instead of encoding it again
    spec_texts: dict[str, tuple[int, str]] = {}

    def spec_text(name: str) -> str:
        meta = engine.meta[name]
        held = spec_texts.get(name)
        if held is None or held[0] != meta.resource_version:
            held = spec_texts[name] = (meta.resource_version, _compact(meta.document["spec"]))
        return held[1]

    #: each run's spec digest (``spec_digest`` of its stored document), at its resource_version
    spec_digests: dict[str, tuple[int, str | None]] = {}

    def digest_of(name: str) -> str | None:
        meta = engine.meta[name]
        held = spec_digests.get(name)
        if held is None or held[0] != meta.resource_version:
            doc = meta.document
            held = spec_digests[name] = (
                meta.resource_version,
                spec_digest({"metadata": doc["metadata"], "spec": doc["spec"]}),
            )
        return held[1]

    def summary_json(name: str) -> dict[str, Any]:
        """A SUMMARY: what a plan needs of a run it finds unchanged (no document: its digest)."""
        return {
            "name": name,
            "resource_version": engine.meta[name].resource_version,
            "state": str(engine.state.runs[name].state),
            "spec_digest": digest_of(name),
        }

    #: each run's SUMMARY as JSON text, for the (resource_version, state) it shows
    summaries: dict[str, tuple[tuple[int, str], str]] = {}

    def summary_text(name: str) -> str:
        key = (engine.meta[name].resource_version, str(engine.state.runs[name].state))
        held = summaries.get(name)
        if held is None or held[0] != key:
            held = summaries[name] = (key, _compact(summary_json(name)))
        return held[1]

    #: the whole summary listing, for the engine's generation it was made at
    listing: list[Any] = [None, ""]

    @route(["/runs", "/jobs"], ["GET"])
    async def list_runs(request: Request):
        view = request.query_params.get("view")
        if view == "summary" and listing[0] == engine.generation:
            return _json_text(listing[1])  # no run changed since: the same text
        generation = engine.generation  # read first: a change while the text is made makes it stale
        runs = engine.state.runs
        order = sorted(runs.values(), key=lambda r: r.seq)
        if view == "summary":
            text = '{"items":[' + ",".join(summary_text(r.name) for r in order) + "]}"
            for held in (spec_digests, summaries):
                for name in [n for n in held if n not in runs]:  # runs deleted since
                    del held[name]
            listing[:] = [generation, text]
            return _json_text(text)
        if view not in (None, "", "full"):
            raise _detail(422, f"unknown view '{view}': 'summary' or 'full'")
        root = run_url(request, "")
        parts = []
        for r in order:
            body = run_json(r.name, request, root)
            del body["spec"]
            parts.append(f'{_compact(body)[:-1]},"spec":{spec_text(r.name)}}}')
        if len(spec_texts) > len(runs):  # runs deleted since
            for name in [n for n in spec_texts if n not in runs]:
                del spec_texts[name]
        return _json_text('{"items":[' + ",".join(parts) + "]}")

    @route(["/runs/{name}", "/jobs/{name}"], ["GET"])
    async def get_run(request: Request, name: str):
        the_run(name)
        return run_json(name, request)

    @route(["/runs/{name}", "/jobs/{name}"], ["PUT"])
    async def put_run(request: Request, name: str):
        the_run(name)
        doc = checked(await body_of(request))
        given = doc["metadata"].get("name")
        if given != name:
            raise _Problem(
                422, [{"path": "metadata.name", "message": f"must be {name}, the run this PUT names"}]
            )
        try:
            engine.update(name, doc, doc["metadata"].get("resource_version"), clock.now())
        except InvalidSpec as exc:
            raise _Problem(422, [{"path": str(e.path), "message": e.message} for e in exc.errors]) from exc
        except Stale as exc:
            raise _detail(409, str(exc), resource_version=exc.current) from exc
        except NotFound as exc:
            raise _detail(404, str(exc)) from exc
        on_change()
        digest_of(name)
        return run_json(name, request)

    @route(["/runs/{name}", "/jobs/{name}"], ["DELETE"])
    async def delete_run(request: Request, name: str):
        the_run(name)
        now = clock.now()
        engine.cancel(name, now)
        body = run_json(name, request)
        engine.delete(name, now)
        on_change()
        return body

    @route(
        ["/runs/{name}/workers", "/runs/{name}/tasks", "/jobs/{name}/workers", "/jobs/{name}/tasks"], ["GET"]
    )
    async def run_workers(request: Request, name: str):
        the_run(name)
        ws = engine.state.workers_of(name)
        running = sum(1 for w in ws if w.state is WorkerState.RUNNING)
        return {
            "items": [worker_json(w) for w in sorted(ws, key=lambda w: w.rank)],
            "readout": readout(running, len(ws)),
            "task_counts": engine.state.task_counts(name),
        }

    @route(["/runs/{name}/events", "/jobs/{name}/events"], ["GET"])
    async def run_events(request: Request, name: str):
        the_run(name)
        items = engine.store.event_rows(name)
        for e in items:
            e.pop("id", None)
        return {"items": items}

    @route(["/workers/{worker}", "/tasks/{worker}"], ["GET"])
    async def get_worker(request: Request, worker: str):
        return worker_json(the_worker(worker))

    @route(["/workers/{worker}/logs", "/tasks/{worker}/logs"], ["GET"])
    async def worker_logs(request: Request, worker: str):
        w = the_worker(worker)
        current = (engine.processes.get(w.name) or {}).get("log")
        attempt = request.query_params.get("attempt")
        if current is None:
            return PlainTextResponse("")
        path = Path(current)
        if attempt is not None:
            if not attempt.isdigit():
                raise _detail(422, "attempt must be a whole number")
            path = path.with_name(f"{w.name}.{int(attempt)}.log")
        try:
            text = path.read_bytes().decode("utf-8", errors="replace")
        except FileNotFoundError:
            raise _detail(404, f"worker {w.name} has no log for attempt {attempt}") from None
        return PlainTextResponse(text)

    @route(["/machines"], ["GET"])
    async def machines(request: Request):
        s = engine.state
        items = []
        for m in engine.store.machine_rows():
            free = s.free.get(m["name"], [0, 0, 0, 0])
            state = "Down" if m["name"] in s.down else m["state"]
            items.append({**m, "state": state, "free_gpus": free[0] + free[1], "free_cpu_cores": free[2]})
        return {"items": items}

    @route(["/info"], ["GET"])
    async def info(request: Request):
        return {
            "org": org,
            "workspace": workspace,
            "cluster": cluster,
            "executor": executor_name,
            "schema_version": engine.store.schema_version(),
        }

    # -- sources -------------------------------------------------------------------------------

    store = engine.store

    @route(["/sources"], ["GET"])
    async def list_sources(request: Request):
        return _json_text(store.list_sources_json())

    @route(["/sources/{rest:path}"], ["GET", "PUT", "POST", "DELETE"])
    async def source_call(request: Request, rest: str):
        name, sub = _source_path(request, rest)
        handler = SOURCE_ROUTES.get((request.method, sub[0] if sub else "", len(sub)))
        if handler is None:
            raise _detail(405, _no_route(request))
        return await handler(request, name, *sub[1:])

    def not_modified(request: Request, name: str) -> Response | None:
        """A 304 when ``If-None-Match`` names the source's tag (``None`` when it does not); 404
        when the source was never written."""
        tag = store.source_tag(name)
        if tag is None:
            raise _detail(404, f"no source named {name}")
        if tag in _tags(request.headers.get("if-none-match")):
            return Response(status_code=304, headers={"ETag": tag})
        return None

    async def get_source(request: Request, name: str):
        unchanged = not_modified(request, name)
        if unchanged is not None:
            return unchanged
        found = store.get_source_json(name)
        if found is None:  # pragma: no cover - removed between the two reads: sources are never removed
            raise _detail(404, f"no source named {name}")
        return _json_text(found[0], tag=found[1])

    async def put_source(request: Request, name: str):
        body = await body_of(request)
        if not isinstance(body, dict):
            raise _Problem(422, [{"path": "", "message": "a source's state must be a JSON object"}])
        expected = body.get("resource_version")
        if expected is not None and (isinstance(expected, bool) or not isinstance(expected, int)):
            raise _Problem(422, [{"path": "resource_version", "message": "must be an integer"}])
        problems = _state_problems(body)
        if problems:
            raise _Problem(422, problems)
        data = {k: v for k, v in body.items() if k not in SERVER_KEYS}
        lock_id = body.get("lock_id") or _lock_header(request)
        try:
            store.put_source(name, data, expected if expected is not None else 0, clock.now(), lock_id)
        except Stale as exc:
            raise _detail(409, str(exc), resource_version=exc.current) from exc
        except LockMismatch as exc:
            raise _detail(409, str(exc), lock=exc.lock) from exc
        found = store.get_source_json(name)
        assert found is not None
        return _json_text(found[0], tag=found[1])

    async def get_source_runs(request: Request, name: str):
        view = request.query_params.get("view")
        if view not in (None, "", "full", "digest"):
            raise _detail(422, f"unknown view '{view}': 'digest' or 'full'")
        unchanged = not_modified(request, name)
        if unchanged is not None:
            return unchanged
        runs = request.query_params.getlist("run") or None
        found = store.source_runs_json(name, specs=view != "digest", runs=runs)
        if found is None:  # pragma: no cover - removed between the two reads: sources are never removed
            raise _detail(404, f"no source named {name}")
        return _json_text(found[0], tag=found[1])

    def written(name: str, rv: int, status: int = 200) -> Response:
        return _json_text(
            f'{{"name":{json.dumps(name)},"resource_version":{rv}}}',
            status=status,
            tag=store.source_tag(name),
        )

    async def put_source_run(request: Request, name: str, run: str):
        body = await body_of(request)
        problems = _entry_problems(body, "")
        if problems:
            raise _Problem(422, problems)
        try:
            rv = store.put_source_run(name, run, body, _lock_header(request), clock.now())
        except LockMismatch as exc:
            raise _detail(409, str(exc), lock=exc.lock) from exc
        return written(name, rv)

    async def delete_source_run(request: Request, name: str, run: str):
        try:
            rv = store.delete_source_run(name, run, _lock_header(request), clock.now())
        except LockMismatch as exc:
            raise _detail(409, str(exc), lock=exc.lock) from exc
        except NotFound as exc:
            raise _detail(404, str(exc)) from exc
        return written(name, rv)

    async def put_source_status(request: Request, name: str):
        body = await body_of(request)
        if not isinstance(body, dict):
            raise _Problem(422, [{"path": "", "message": "a source's status must be a JSON object"}])
        try:
            rv = store.put_source_status(name, body, _lock_header(request), clock.now())
        except LockMismatch as exc:
            raise _detail(409, str(exc), lock=exc.lock) from exc
        return written(name, rv)

    async def post_source_history(request: Request, name: str):
        body = await body_of(request)
        if not isinstance(body, dict):
            raise _Problem(422, [{"path": "", "message": "an apply record must be a JSON object"}])
        try:
            rv = store.add_source_history(name, body, _lock_header(request), clock.now())
        except LockMismatch as exc:
            raise _detail(409, str(exc), lock=exc.lock) from exc
        return written(name, rv, 201)

    async def lock_source(request: Request, name: str):
        raw = await request.body()
        body = await body_of(request) if raw.strip() else {}
        if not isinstance(body, dict):
            raise _Problem(422, [{"path": "", "message": "a lock request must be a JSON object"}])
        lock = {
            "id": str(body.get("id") or uuid.uuid4()),
            "owner": str(body.get("owner") or "unknown"),
            "created_at": clock.now(),
        }
        took, held, tag = store.lock_source(name, lock, clock.now())
        if not took:
            raise _Problem(409, {"detail": _locked(name, held), "lock": held}, {"ETag": tag})
        return JSONResponse(held, status_code=201, headers={"ETag": tag})

    async def unlock_source(request: Request, name: str):
        outcome, held, tag = store.unlock_source(name, request.query_params.get("id"))
        if outcome == "none":
            raise _detail(404, f"source {name} is not locked")
        if outcome == "other":
            raise _detail(409, _locked(name, held or {}), lock=held)
        return Response(status_code=204, headers={"ETag": tag} if tag else None)

    #: (method, the first step after the name, how many steps): the handler
    SOURCE_ROUTES = {
        ("GET", "", 0): get_source,
        ("PUT", "", 0): put_source,
        ("POST", "lock", 1): lock_source,
        ("DELETE", "lock", 1): unlock_source,
        ("GET", "runs", 1): get_source_runs,
        ("PUT", "runs", 2): put_source_run,
        ("DELETE", "runs", 2): delete_source_run,
        ("PUT", "status", 1): put_source_status,
        ("POST", "history", 1): post_source_history,
    }

    @app.get("/healthz", include_in_schema=False)
    async def healthz():
        return {"ok": True}

    return app


SUBRESOURCES = frozenset({"lock", "runs", "status", "history"})


def _source_path(request: Request, rest: str) -> tuple[str, list[str]]:
    """The source's name and the steps after it (``[]``, ``["lock"]``, ``["runs", RUN]``, …).

    Read from the raw path when the server has it: a name sent percent-encoded whole (``%2F``
    for each '/', as astra sends it) is one segment, so it is never confused with a
    sub-resource, whatever it ends with. A name sent with plain '/' is read from the decoded
    path, and a trailing ``/lock``, ``/runs``, ``/runs/RUN``, ``/status`` or ``/history`` is
    taken as the sub-resource."""
    raw = request.scope.get("raw_path")
    if isinstance(raw, bytes | bytearray):
        parts = raw.decode("latin-1").split("?", 1)[0].split("/")
        at = 10 if parts[1:4] == ["api", "v1", "orgs"] else 2
        if len(parts) > at + 1 and parts[at] == "sources" and parts[at + 1] and "" not in parts[at + 2 :]:
            sub = [unquote(p) for p in parts[at + 2 :]]
            if _known(sub):
                return unquote(parts[at + 1]), sub
    parts = rest.split("/")
    for n in (2, 1):
        if len(parts) > n and _known(parts[-n:]):
            return "/".join(parts[:-n]), parts[-n:]
    return rest, []


def _known(sub: list[str]) -> bool:
    """Whether ``sub`` names a source's sub-resource: nothing, lock, runs, runs/RUN, status, history."""
    if not sub:
        return True
    if sub[0] == "runs" and len(sub) == 2:
        return sub[1] != ""
    return len(sub) == 1 and sub[0] in SUBRESOURCES


def _no_route(request: Request) -> str:
    return f"no route {request.method} {request.url.path}"


def _tags(header: str | None) -> set[str]:
    return {t.strip() for t in (header or "").split(",") if t.strip()}


def _lock_header(request: Request) -> str | None:
    """The lock a write is made under: the ``X-Astra-Lock`` header, else the ``?lock=`` query parameter."""
    return request.headers.get("x-astra-lock") or request.query_params.get("lock") or None


def _compact(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"))


def _json_text(text: str, *, status: int = 200, tag: str | None = None) -> Response:
    """JSON already serialised (stored texts put together): sent as it is."""
    return Response(
        text, status_code=status, media_type="application/json", headers={"ETag": tag} if tag else None
    )


def _entry_problems(entry: Any, path: str) -> list[dict[str, str]]:
    where = f"{path}." if path else ""
    if not isinstance(entry, dict):
        return [
            {"path": path, "message": 'an inventory entry must be an object {"spec", "applied_at", "file"}'}
        ]
    problems = []
    if not isinstance(entry.get("spec"), dict):
        problems.append(
            {"path": f"{where}spec", "message": "must be an object: the last-applied run document"}
        )
    at = entry.get("applied_at")
    if isinstance(at, bool) or not isinstance(at, int | float):
        problems.append({"path": f"{where}applied_at", "message": "must be a number (epoch seconds)"})
    if entry.get("file") is not None and not isinstance(entry["file"], str):
        problems.append({"path": f"{where}file", "message": "must be a string or null"})
    return problems


def _state_problems(body: dict[str, Any]) -> list[dict[str, str]]:
    problems = []
    inventory = body.get("inventory")
    if inventory is not None:
        if not isinstance(inventory, dict):
            problems.append(
                {"path": "inventory", "message": "must be an object: {RUN: {spec, applied_at, file}}"}
            )
        else:
            for run, entry in inventory.items():
                problems += _entry_problems(entry, f"inventory.{run}")
    if body.get("status") is not None and not isinstance(body["status"], dict):
        problems.append({"path": "status", "message": "must be an object"})
    if body.get("history") is not None and not isinstance(body["history"], list):
        problems.append({"path": "history", "message": "must be a list"})
    return problems


def _locked(name: str, held: dict[str, Any]) -> str:
    import datetime as dt

    since = held.get("created_at")
    when = dt.datetime.fromtimestamp(since, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if since else "?"
    return f"source {name} is locked by {held.get('owner')} since {when} (lock {held.get('id')})"
