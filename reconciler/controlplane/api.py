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
    WORKER = {"name", "run", "rank", "group", "state", "reason", "machine", "exit_code",
              "restarts", "attempts", "gpus", "cpu_cores", "memory_bytes", "placed_at",
              "started_at", "ended_at", "image"}

``resource_version`` comes from one counter for the whole store (as in Kubernetes): every change
of any run's document (POST, PUT) takes its next value, so it only grows, across restarts and
across a delete and re-create under the same name (a plan saved before that sees it is stale). The
scheduler's changes of state do not touch it, so a plan made while a run runs stays valid. A
source's resource_version is its own: 1 at its first write, one more with each write.

Sources (a reconcile source's memory, kept with the cluster; written by ``reconciler.state``)::

    GET    /sources                200 {"items": [SOURCE, ...]} (by name)
    GET    /sources/{name}         200 SOURCE | 404 {"detail"} when never written
    PUT    /sources/{name}         body: {"resource_version": N, ...state} → 200 SOURCE (resource_version N+1)
                                   N is the one read (0, or left out on the first write: create);
                                   409 {"detail", "resource_version": current} when stale.
                                   "lock_id": optional; when given and the source is locked by
                                   another id: 409 {"detail", "lock": HOLDER}.
    POST   /sources/{name}/lock    body: {"owner": "who@host", "id"?: "…"} → 201 LOCK
                                   409 {"detail": "source NAME is locked by OWNER since …", "lock": HOLDER}
    DELETE /sources/{name}/lock    ``?id=LOCK_ID`` (left out: force) → 204 | 404 not locked |
                                   409 {"detail", "lock": HOLDER} when the id is not the holder's

    SOURCE = {"name", "resource_version", "lock": LOCK or null, ...the state as last PUT, e.g.
              "inventory": [run names it applied], "last_applied": {run: document},
              "status": {"ready", "state", "reason", ...}, "history": [{...}, ...]}
    LOCK   = {"id", "owner", "created_at" (epoch seconds)}

A source's name may hold '/' (a git remote and a path), plain or as %2F.
The state's keys are the client's: the server keeps whatever JSON object it is given, except
``name``, ``resource_version``, ``lock`` and ``lock_id``, which are the server's.
"""

from __future__ import annotations

import hmac
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from reconciler.spec.validate import validate_data

from .clock import Clock
from .engine import Engine
from .scheduler import HOLDING, WorkerRecord, WorkerState, readout
from .store import NameExists, NotFound, Stale, StoreError

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

    def run_json(name: str, request: Request) -> dict[str, Any]:
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
                "url": run_url(request, name),
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
        body = run_json(name, request)
        return JSONResponse(body, status_code=201, headers={"Location": body["status"]["url"]})

    @route(["/runs", "/jobs"], ["GET"])
    async def list_runs(request: Request):
        order = sorted(engine.state.runs.values(), key=lambda r: r.seq)
        return {"items": [run_json(r.name, request) for r in order]}

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
        except Stale as exc:
            raise _detail(409, str(exc), resource_version=exc.current) from exc
        except NotFound as exc:
            raise _detail(404, str(exc)) from exc
        on_change()
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
        return {"items": store.list_sources()}

    @route(["/sources/{name:path}"], ["GET"])
    async def get_source(request: Request, name: str):
        found = store.get_source(name)
        if found is None:
            raise _detail(404, f"no source named {name}")
        return found

    @route(["/sources/{name:path}"], ["PUT"])
    async def put_source(request: Request, name: str):
        body = await body_of(request)
        if not isinstance(body, dict):
            raise _Problem(422, [{"path": "", "message": "a source's state must be a JSON object"}])
        expected = body.get("resource_version")
        if expected is not None and (isinstance(expected, bool) or not isinstance(expected, int)):
            raise _Problem(422, [{"path": "resource_version", "message": "must be an integer"}])
        lock_id = body.get("lock_id")
        if lock_id is not None:
            held = (store.get_source(name) or {}).get("lock")
            if held and held.get("id") != lock_id:
                raise _detail(409, _locked(name, held), lock=held)
        data = {k: v for k, v in body.items() if k not in SERVER_KEYS}
        try:
            return store.put_source(name, data, expected if expected is not None else 0, clock.now())
        except Stale as exc:
            raise _detail(409, str(exc), resource_version=exc.current) from exc

    @route(["/sources/{name:path}/lock"], ["POST"], 201)
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
        took, held = store.lock_source(name, lock, clock.now())
        if not took:
            raise _detail(409, _locked(name, held), lock=held)
        return JSONResponse(held, status_code=201)

    @route(["/sources/{name:path}/lock"], ["DELETE"])
    async def unlock_source(request: Request, name: str):
        outcome, held = store.unlock_source(name, request.query_params.get("id"))
        if outcome == "none":
            raise _detail(404, f"source {name} is not locked")
        if outcome == "other":
            raise _detail(409, _locked(name, held or {}), lock=held)
        return Response(status_code=204)

    @app.get("/healthz", include_in_schema=False)
    async def healthz():
        return {"ok": True}

    return app


def _locked(name: str, held: dict[str, Any]) -> str:
    import datetime as dt

    since = held.get("created_at")
    when = dt.datetime.fromtimestamp(since, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if since else "?"
    return f"source {name} is locked by {held.get('owner')} since {when} (lock {held.get('id')})"
