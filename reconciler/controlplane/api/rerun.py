"""``POST /runs/{name}/rerun`` (= ``/jobs/{name}/rerun``): a finished run runs again.

Body ``{"failed": bool}`` (``wire.RerunRequest``; left out: whole). It composes: read the body,
call ``Engine.rerun`` (the rules are ``reconciler.controlplane.rerun``'s), answer the run that
starts (201, ``Location`` its URL): the same run (whole), or the new array ``<run>-rerun-<k>``.
Must not touch: scheduling rules, SQL, processes.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Request
from fastapi.responses import Response

from ...runspec.errors import InvalidSpec
from ...wire import models as wire
from ..rerun import RerunRefused
from ..store import NotFound
from .context import Api, ApiError, ApiRoute, Scoped, answer
from .runs import RunName, problems, under_both, view

__all__ = ["rerun", "router"]

router = APIRouter(tags=["runs"], route_class=ApiRoute)


def rerun(api: Scoped, name: str, failed: bool) -> tuple[str, str]:
    """Run the scope's finished run ``name`` again (``Engine.rerun``), audited; the key and the
    name of the run that starts. Raises ``NotFound``, ``RerunRefused`` or ``InvalidSpec`` with their words.
    The console's Rerun buttons take this same step."""
    record = api.engine.rerun(api.key(name), failed=failed, now=api.clock.now())
    api.on_change()
    api.cache.digest(record.name)
    started = api.engine.meta[record.name].document["metadata"]["name"]
    api.audit("rerun", "run", name, {"failed": failed, "started": started})
    return record.name, started


def rerun_run(
    request: Request,
    api: Api,
    name: RunName,
    wanted: Annotated[wire.RerunRequest | None, Body()] = None,
) -> Response:
    """Run a finished run again: whole (under its name), or with ``failed`` a new array of only
    the copies that did not complete, each seeing its original index. 409 for a run that has not
    finished (or, with ``failed``, one that is no array, or whose copies all completed)."""
    wanted = wanted or wire.RerunRequest()
    try:
        key, _ = rerun(api, name, wanted.failed)
    except NotFound as exc:
        raise ApiError(404, wire.Detail(detail=str(exc))) from exc
    except RerunRefused as exc:
        raise ApiError(409, wire.Detail(detail=str(exc))) from exc
    except InvalidSpec as exc:
        raise ApiError(422, problems(exc.errors)) from exc
    run = view(api, request, key)
    return answer(run, 201, {"Location": run.status.url})


under_both(
    router,
    "/{name}/rerun",
    rerun_run,
    method="POST",
    operation="rerun_{word}",
    status_code=201,
    response_model=wire.Run,
    responses={s: {"model": m} for s, m in ((404, wire.Detail), (409, wire.Detail), (422, wire.Problems))},
)
