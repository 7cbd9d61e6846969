"""Workers and their logs (a worker is a task: ``/workers`` = ``/tasks``).

Owns the routes ``GET /runs/{name}/workers`` (and ``/tasks``, under ``/jobs`` too),
``GET /workers/{worker}`` and ``GET /workers/{worker}/logs``. Each reads the engine's records
and answers a ``wire`` model (logs: the output as text). Must not touch: scheduling rules, SQL,
the executor (a log is read from the file the executor named).
"""

from __future__ import annotations

from pathlib import Path as FilePath
from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import PlainTextResponse, Response

from ...wire import models as wire
from ..scheduler import WorkerRecord
from .context import Api, ApiError, Responses, answer
from .runs import RUNS, RunName, the_run
from .views import worker_view, workers_view

__all__ = ["router"]

router = APIRouter(tags=["workers"])

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
            (401, "No token, or another one."),
            (403, "Another org, workspace or cluster than the server's."),
            (404, "No such worker, or no log of that attempt."),
            (422, "An attempt that is not a whole number."),
            (503, "The server's store cannot be used."),
        )
    },
}


def the_worker(api: Api, name: str) -> WorkerRecord:
    w = api.engine.state.workers.get(name)
    if w is None:
        raise ApiError(404, wire.Detail(detail=f"no worker named {name}"))
    return w


async def run_workers(api: Api, name: RunName) -> Response:
    """The run's workers by rank, with the readout (``Workers R running of N``) and the counts."""
    the_run(api, name)
    return answer(workers_view(api.engine, name))


async def get_worker(api: Api, worker: WorkerName) -> Response:
    """One worker."""
    return answer(worker_view(api.engine, the_worker(api, worker)))


async def worker_logs(
    api: Api,
    worker: WorkerName,
    attempt: Annotated[
        int | None, Query(ge=0, description="The attempt whose output to send (left out: the latest).")
    ] = None,
) -> Response:
    """The output of the worker's latest attempt (``?attempt=N``: of that one), as text."""
    w = the_worker(api, worker)
    current = (api.engine.processes.get(w.name) or {}).get("log")
    if current is None:
        return PlainTextResponse("")
    path = FilePath(current)
    if attempt is not None:
        path = path.with_name(f"{w.name}.{attempt}.log")
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise ApiError(404, wire.Detail(detail=f"worker {w.name} has no log for attempt {attempt}")) from None
    return PlainTextResponse(text)


for run_word, runs in RUNS:
    for word, workers in WORKERS:
        router.add_api_route(
            runs + "/{name}" + workers,
            run_workers,
            methods=["GET"],
            operation_id=f"list_{run_word}_{word}s",
            response_model=wire.WorkerList,
            responses=NOT_FOUND,
        )
for word, workers in WORKERS:
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
