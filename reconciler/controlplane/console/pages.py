"""The console's pages (GET): Runs, a run (status, spec, events, Workers tab), a worker's Log,
New → Run, Sources and Cluster.

Owns the routes that show; each takes the ``viewer`` (``access``), holds the engine's gate while
it reads (``engine_call``: the same gate as the API's routes, the reading done in a worker thread)
and renders a template with ``reads``'s ``wire`` models. The paths are the seeds' console URLs:

==========================================  ==========================================
``/o/{org}/w/{ws}/jobs/{cluster}``          Runs (``?state=``, repeatable; ``?label=k=v``; ``?page=``)
``/o/{org}/w/{ws}/jobs/{cluster}/{name}``   a run (``?page=``: of its Workers tab); ``…/events``
``…/{name}/log/{worker}``                   a worker's Log, following it (``…/text?offset=``)
``/o/{org}/w/{ws}/jobs/{cluster}/-/new``    New → Run ('-' is no run's name)
``/o/{org}/w/{ws}/sources``                 Sources (the latest active first)
``/o/{org}/w/{ws}/sources/{source}``        a source: status, held replaces, runs, history
``/o/{org}/w/{ws}/alerts``                  Alerts: the rules and what they sent
``/o/{org}/w/{ws}/cluster/{cluster}``       Cluster: the GPU map and the queue
==========================================  ==========================================

A page of a workspace the viewer's token may not read, or that is not there, is a 404 page.
Must not touch: the engine's state (``actions`` writes), SQL, access rules.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from ...runspec.vocabulary import RunState
from ..api.context import ApiContext, Scoped
from ..api.views import run_view
from ..auth import Role
from ..scopes import DEFAULT, Scope
from . import reads
from .access import BASE, Viewer, viewer
from .form import ARRAY_START, FIELDS
from .render import render

__all__ = ["BASE", "NotHere", "engine_call", "router", "scoped"]

T = TypeVar("T")


class NotHere(Exception):
    """A page of another org, workspace or cluster, or of no run: answered as a 404 page."""


async def engine_call(request: Request, read: Callable[[Scoped], T]) -> T:
    """``read(view)`` (the page's ``Scoped``, as an API route has it) in a worker thread, holding
    the engines' gate as every API route does: shared for a page (GET), alone for a form's
    POST."""
    api: ApiContext = request.app.state.astra
    async with api.gate.shared() if request.method in ("GET", "HEAD") else api.gate:
        return await asyncio.to_thread(read, request.state.scoped)


def _scope_of(request: Request, who: Viewer, role: Role) -> Scoped:
    """The page's view: the scope its path names (a page without a cluster: the default one),
    held to what the viewer's token may see (``Identity.refusal``'s words) and to what exists."""
    p = request.path_params
    scope = Scope(p.get("org", DEFAULT), p.get("workspace", DEFAULT), p.get("cluster", DEFAULT))
    api: ApiContext = request.app.state.astra
    refused = who.who.refusal(scope.org, scope.workspace, role)
    if refused is not None:
        raise NotHere(refused)
    engine = api.clusters.get(scope.cluster)
    if engine is None or (scope.org, scope.workspace) not in api.workspaces:
        raise NotHere(f"no workspace {scope.workspace} of org {scope.org} on cluster {scope.cluster} here")
    return Scoped(api, scope, who.who, engine)


async def scoped(request: Request, who: Annotated[Viewer, Depends(viewer)]) -> Viewer:
    """The viewer, on a page its token may read (else ``NotHere``); the page's ``Scoped`` is
    kept on the request (``engine_call`` hands it over)."""
    request.state.scoped = _scope_of(request, who, Role.READ if request.method == "GET" else Role.WRITE)
    return who


Who = Annotated[Viewer, Depends(scoped)]
router = APIRouter(include_in_schema=False)


@router.get("/")
async def home(request: Request, who: Annotated[Viewer, Depends(viewer)]) -> Response:
    """The Runs page of the token's workspace (of ``default`` for a token of a whole org)."""
    workspace = who.who.workspace or DEFAULT
    return RedirectResponse(
        BASE.format(org=who.who.org, workspace=workspace, cluster=DEFAULT), status_code=303
    )


@router.get(BASE)
async def runs(
    request: Request,
    _who: Who,
    state: Annotated[list[str] | None, Query()] = None,
    label: str = "",
    page: int = 0,
) -> Response:
    """Every run: state, reason, readout, GPUs, age and source; filtered, one page at a time."""
    states = [s for s in state or [] if s]

    def read(api: Scoped) -> reads.RunsPage:
        return reads.runs_page(api, api.runs_url(request), states, label, page)

    found = await engine_call(request, read)
    context = {"page": found, "states": [str(s) for s in RunState], "chosen": states, "label": label}
    return render(request, "runs.html", context)


@router.get(BASE + "/-/new")
async def new_run(request: Request, _who: Who) -> Response:
    return render(request, "new.html", new_context({}, {}, []))


def new_context(values: dict[str, str], errors: dict[str, list[str]], above: list[str]) -> dict[str, Any]:
    """What the New → Run page shows: the fields, their values and their errors."""
    return {"fields": FIELDS, "values": values, "errors": errors, "above": above, "array_start": ARRAY_START}


@router.get(BASE + "/{name}")
async def run_page(request: Request, _who: Who, name: str, page: int = 0) -> Response:
    """A run: status and reason (and a replace its source holds), its schedule and its chain of
    runs (``depends_on``, both ways), spec, events, actions, and its Workers tab (one page)."""

    def read(api: Scoped) -> dict[str, Any] | None:
        key = api.key(name)
        if key not in api.engine.state.runs:
            return None
        run = run_view(api.engine, key, api.runs_url(request), api.scope.workspace)
        workers, shown, pages = reads.workers_tab(api.engine, key, page)
        owner = (run.metadata.annotations or {}).get("astra.source")
        return {
            "run": run,
            "held": reads.held_replace(api, owner, name) if owner else None,
            "chain": reads.chain_of(api, name),
            "workers": workers,
            "asked": reads.asked_gpus(api, workers.items),
            "wpage": shown,
            "wpages": pages,
            "annotations": run.metadata.annotations or {},
            "document": {"metadata": run.metadata.model_dump(exclude_none=True), "spec": run.spec},
        }

    found = await engine_call(request, read)
    if found is None:
        raise NotHere(f"no run named {name}")
    return render(request, "run.html", found)


@router.get(BASE + "/{name}/events")
async def events_page(request: Request, _who: Who, name: str) -> Response:
    """The run's events in time order (the newest ``reads.EVENTS_SHOWN``)."""

    def read(api: Scoped) -> tuple[list[Any], int] | None:
        key = api.key(name)
        if key not in api.engine.state.runs:
            return None
        return reads.run_events(api.engine, key)

    found = await engine_call(request, read)
    if found is None:
        raise NotHere(f"no run named {name}")
    events, total = found
    cut = total if total > len(events) else 0
    return render(request, "events.html", {"name": name, "events": events, "cut": cut})


@router.get(BASE + "/{name}/log/{worker}")
async def log_page(request: Request, _who: Who, name: str, worker: str) -> Response:
    """A worker's Log: its state, attempt and machine (followed while it may change), the
    masking note of a run that reads secrets, and its output, followed while it runs
    (``console.js`` polls ``…/text``)."""
    found = await engine_call(request, lambda api: reads.log_facts(api, name, worker))
    if found is None:
        raise NotHere(f"no worker named {worker} in run {name}")
    return render(request, "log.html", {"name": name, "worker": worker, "facts": found})


@router.get(BASE + "/{name}/log/{worker}/text")
async def log_text(request: Request, _who: Who, name: str, worker: str, offset: int = 0) -> Response:
    """``{"text", "offset", "live", "attempt"}``: the output of the worker's current start
    (``attempt``: how many times it was started) from ``offset`` (JSON: the page sets it as text)."""
    found = await engine_call(request, lambda api: reads.log_chunk(api.engine, api.key(worker), offset))
    if found is None:
        raise NotHere(f"no worker named {worker}")
    said = {"text": found.text, "offset": found.offset, "live": found.live, "attempt": found.attempt}
    return JSONResponse(said, headers={"Cache-Control": "no-store"})


@router.get("/o/{org}/w/{workspace}/sources")
async def sources_page(request: Request, _who: Who) -> Response:
    """Each source: status, the revision last applied, when and by whom, its runs, its history."""
    found = await engine_call(request, lambda api: reads.sources(api.engine, api.source_prefix()))
    return render(request, "sources.html", {"sources": found.items, "one": False})


@router.get("/o/{org}/w/{workspace}/sources/{source:path}")
async def source_page(request: Request, _who: Who, source: str) -> Response:
    """One source: what the Sources page says of it, every run it applied shown."""
    found = await engine_call(request, lambda api: reads.source(api.engine, api.source_key(source)))
    if found is None:
        raise NotHere(f"no source named {source}")
    return render(request, "sources.html", {"sources": [found], "one": True})


@router.get("/o/{org}/w/{workspace}/alerts")
async def alerts_page(request: Request, _who: Who) -> Response:
    """The workspace's alerts and their messages: what was sent, when, and the answer."""

    def read(api: Scoped) -> dict[str, Any]:
        ws = api.scope.workspace_key
        return {"alerts": api.engine.store.alert_rules(ws), "messages": api.engine.store.alert_history(ws)}

    found = await engine_call(request, read)
    return render(request, "alerts.html", found)


@router.get("/o/{org}/w/{workspace}/cluster/{cluster}")
async def cluster_page(request: Request, _who: Who) -> Response:
    """The GPU map (rack → NVLink domain → machine, each GPU by the run holding it) and the queue."""

    def read(api: Scoped) -> dict[str, Any]:
        waiting, unplaced, total = reads.queue(api)
        return {
            "racks": reads.gpu_map(api),
            "waiting": waiting,
            "asked": reads.asked_gpus(api, waiting),
            "unplaced": unplaced,
            "total": total,
        }

    found = await engine_call(request, read)
    runs = sorted(
        {
            s
            for domains in found["racks"].values()
            for ms in domains.values()
            for m in ms
            for s in m.slots
            if s
        }
    )
    found["colour"] = {run: i % 12 for i, run in enumerate(runs)}
    return render(request, "cluster.html", found)
