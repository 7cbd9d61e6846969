"""Workers and their logs (a worker is a task: ``/workers`` = ``/tasks``).

Owns the routes ``GET /runs/{name}/workers`` (and ``/tasks``, under ``/jobs`` too), the
workspace's collection ``GET /workers`` (= ``/tasks``: filtered by ``?run=`` and ``?state=``,
each repeatable, paged by ``?limit=`` and ``?continue=`` in the Kubernetes manner), and
``GET /workers/{worker}`` and ``GET /workers/{worker}/logs``. Each reads the engine's records
and answers a ``wire`` model (logs: the output as text; ``?attempt=N`` that attempt's,
``?since=T`` only its lines written at T or later, by the index beside the log: ``logtimes``;
``?tail=N`` only its last N lines, read from the end of the file).
Must not touch: scheduling rules, SQL, the executor (a log is read from the file the executor
named).

A ``continue`` token names the last worker of the page it came with (its run's submission
number and its rank), so the next page starts after it even while runs come and go; it is
opaque to clients, and a text that is not one is a 422.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path as FilePath
from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import PlainTextResponse, Response

from ...wire import models as wire
from ..logtimes import read_since
from ..scheduler import WorkerRecord, WorkerState
from .context import Api, ApiError, ApiRoute, Responses, answer, json_text
from .runs import RunName, the_run, under_both
from .views import worker_page, worker_view

__all__ = ["router"]

router = APIRouter(tags=["workers"], route_class=ApiRoute)

#: A worker is a task (``/tasks``, also ``/workers``): each route is served under both.
WORKERS = (("worker", "/workers"), ("task", "/tasks"))

WorkerName = Annotated[
    str, Path(description="The worker's name: ``<run>-<rank>`` or ``<run>-<group>-<rank>``.")
]
NOT_FOUND: Responses = {404: {"model": wire.Detail}}
#: The logs' answers: the output as text, and JSON errors (listed whole: with a text answer,
#: FastAPI would list an error's model under text/plain)
LOGS_ANSWERS: Responses = {
    200: {"content": wire.LOGS_CONTENT},
    **{
        status: {
            "description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Detail"}}},
            **({"headers": {"WWW-Authenticate": {"schema": {"type": "string"}}}} if status == 401 else {}),
        }
        for status, description in (
            (400, "A query parameter it does not take."),
            (401, "No token, or another one."),
            (403, "Another org, workspace or cluster than the server's."),
            (404, "No such worker, or no log of that attempt."),
            (422, "An attempt or a tail that is not a whole number, or a since that is not a number."),
            (503, "The server's store cannot be used."),
        )
    },
}


#: The most workers one page of ``GET /workers`` holds (``?limit=``; left out: every one).
PAGE_MAX = 10_000
#: The collection's answers besides 200: a bad state, limit or continue token.
BAD_QUERY: Responses = {422: {"model": wire.Detail, "description": "An unknown state, a bad limit or token."}}

RunFilter = Annotated[
    list[str] | None,
    Query(alias="run", description="Only the workers of this run; repeat it for several (``?run=a&run=b``)."),
]
StateFilter = Annotated[
    list[WorkerState] | None,
    Query(alias="state", description="Only workers in this state; repeat it for several."),
]
Limit = Annotated[
    int | None,
    Query(
        ge=1,
        le=PAGE_MAX,
        description=f"At most this many workers (1 to {PAGE_MAX}); the answer's ``continue`` asks "
        "for the next ones. Left out: every worker, in one answer.",
    ),
]
Continue = Annotated[
    str | None,
    Query(alias="continue", description="The ``continue`` of the previous page (same filters and limit)."),
]


def token(position: tuple[int, int]) -> str:
    """A ``continue`` token: the position of a page's last worker, opaque to clients."""
    return base64.urlsafe_b64encode(json.dumps(position).encode()).decode().rstrip("=")


def position(text: str) -> tuple[int, int]:
    """The position a ``continue`` token names; 422 for one this server did not make."""
    try:
        seq, rank = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        if isinstance(seq, int) and isinstance(rank, int):
            return seq, rank
    except (ValueError, TypeError, RecursionError):  # not base64, not JSON, not a pair: not ours
        pass
    raise ApiError(422, wire.Detail(detail=f"continue {text!r} is not a token this server gave"))


def list_workers(
    api: Api, run: RunFilter = None, state: StateFilter = None, limit: Limit = None, after: Continue = None
) -> Response:
    """The workspace's workers: runs in submission order, each run's by rank; filtered, paged."""
    page, last = worker_page(
        api.engine,
        api.runs(),
        {api.key(r) for r in run} if run is not None else None,
        set(state) if state is not None else None,
        limit,
        position(after) if after is not None else None,
    )
    if last is not None:
        page.continue_ = token(last)
    return answer(page)


def the_worker(api: Api, name: str) -> WorkerRecord:
    w = api.engine.state.workers.get(api.key(name))
    if w is None:
        raise ApiError(404, wire.Detail(detail=f"no worker named {name}"))
    return w


def run_workers(api: Api, name: RunName) -> Response:
    """The run's workers by rank, with the readout (``Workers R running of N``) and the counts."""
    return json_text(api.cache.workers(the_run(api, name)))


def get_worker(api: Api, worker: WorkerName) -> Response:
    """One worker."""
    return answer(worker_view(api.engine, the_worker(api, worker)))


def worker_logs(
    api: Api,
    worker: WorkerName,
    attempt: Annotated[
        int | None, Query(ge=0, description="The attempt whose output to send (left out: the latest).")
    ] = None,
    since: Annotated[float | None, Query(allow_inf_nan=False, description=wire.LOGS_SINCE)] = None,
    tail: Annotated[int | None, Query(ge=0, description=wire.LOGS_TAIL)] = None,
) -> Response:
    """The output of the worker's latest attempt (``?attempt=N``: of that one), as text
    (``?since=T``: its lines written at T or later; ``?tail=N``: the last N of those lines)."""
    w = the_worker(api, worker)
    current = (api.engine.processes.get(w.name) or {}).get("log")
    if current is None:
        return PlainTextResponse("")
    path = FilePath(current)
    if attempt is not None:
        path = path.with_name(f"{worker}.{attempt}.log")
    try:
        if since is not None:
            data = last_lines(read_since(path, since, api.clock.now()), tail)
        else:
            data = path.read_bytes() if tail is None else read_last_lines(path, tail)
    except FileNotFoundError:
        raise ApiError(404, wire.Detail(detail=f"worker {worker} has no log for attempt {attempt}")) from None
    return PlainTextResponse(data.decode("utf-8", errors="replace"))


#: How much of a log's end ``read_last_lines`` reads at a time.
TAIL_STEP = 64 * 1024


def last_lines(data: bytes, n: int | None) -> bytes:
    """The last ``n`` lines of ``data`` (``None``: all of it): each ends with a newline, but the
    last may not. ``astra logs --tail N`` keeps the last N of what ``str.splitlines`` splits,
    which splits at every newline and more: those are among these."""
    if n is None:
        return data
    if n == 0:
        return b""
    pos = len(data) - 1 if data.endswith(b"\n") else len(data)
    for _ in range(n):
        pos = data.rfind(b"\n", 0, pos)
        if pos < 0:
            return data
    return data[pos + 1 :]


def read_last_lines(path: FilePath, n: int) -> bytes:
    """``last_lines`` of the file at ``path``, reading from its end only as far back as they go."""
    with path.open("rb") as f:
        at = f.seek(0, 2)
        data = b""
        while at > 0:
            step = min(TAIL_STEP, at)
            at -= step
            f.seek(at)
            data = f.read(step) + data
            if data.count(b"\n", 0, len(data) - 1) >= n:
                break
    return last_lines(data, n)


for kind, workers in WORKERS:
    under_both(
        router,
        "/{name}" + workers,
        run_workers,
        method="GET",
        operation="list_{word}_" + kind + "s",
        response_model=wire.WorkerList,
        responses=NOT_FOUND,
    )
for word, workers in WORKERS:
    router.add_api_route(
        workers,
        list_workers,
        methods=["GET"],
        operation_id=f"list_{word}s",
        response_model=wire.WorkerPage,
        responses=BAD_QUERY,
    )
    router.add_api_route(
        workers + "/{worker}",
        get_worker,
        methods=["GET"],
        operation_id=f"get_{word}",
        response_model=wire.Worker,
        responses=NOT_FOUND,
    )
    router.add_api_route(
        workers + "/{worker}/logs",
        worker_logs,
        methods=["GET"],
        operation_id=f"get_{word}_logs",
        response_class=PlainTextResponse,
        responses=LOGS_ANSWERS,
    )
