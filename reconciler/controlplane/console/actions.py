"""The console's writes (POST, each with the form's CSRF token): New → Run, cancel, delete.

Owns those routes. Each does what the API's route of the same operation does, with its checks
and words: a new run is checked by the API's one validator (``api.runs.checked``: the 422's
problems, shown beside the fields they name), submitted to the engine (409's words when the name
is taken), and the scheduler woken (``on_change``); cancel and delete are the engine's, as
``DELETE /runs/{name}`` does them. Must not touch: rules of its own, SQL.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from ...runspec.models import RULES_CHECKED, Run
from ..api.context import ApiError, Scoped
from ..api.rerun import rerun as rerun_step
from ..api.runs import _source_of, checked
from ..rerun import RerunRefused
from ..runnable import unrunnable
from ..store import NameExists, NotFound
from .access import Viewer, checked_form
from .form import document_of, field_of
from .pages import BASE, NotHere, engine_call, new_context, scoped
from .render import render

__all__ = ["router"]

router = APIRouter(include_in_schema=False)

Form = Annotated[dict[str, str], Depends(checked_form)]
Who = Annotated[Viewer, Depends(scoped)]


def _runs_url(request: Request) -> str:
    org, workspace, cluster = request.state.scoped.scope
    return BASE.format(org=org, workspace=workspace, cluster=cluster)


def _submitted(api: Scoped, doc: Any) -> list[tuple[str, str]]:
    """Submit ``doc`` as ``POST /runs`` does: its problems (path, message), none when it started."""
    try:
        good = checked(doc)
    except ApiError as refused:
        body = refused.body.model_dump()
        return [(p["path"], p["message"]) for p in body] if isinstance(body, list) else [("", str(body))]
    never = unrunnable(api.engine.executor, Run.model_validate(good, context=RULES_CHECKED))
    if never is not None:  # the local executor could never start it: said before, not by 16 crash loops
        return [never]
    try:
        record = api.engine.submit(good, api.clock.now(), api.scope)
    except NameExists as exc:
        return [("metadata.name", str(exc))]
    api.on_change()
    api.cache.digest(record.name)
    api.audit("create", "run", good["metadata"]["name"], {"spec": good["spec"]}, source=_source_of(good))
    return []


@router.post(BASE + "/-/new")
async def create(request: Request, _who: Who, form: Form) -> Response:
    """Start the run the form (or its JSON) says; else the form again, each problem by its field.
    ``mode=json`` (Edit as JSON) shows the fields' document as JSON, to edit and start."""
    values = {k: v for k, v in form.items() if k != "csrf"}
    if values.get("mode") == "to-json":
        values["json"] = json.dumps(document_of(values), indent=2)
        return render(request, "new.html", {**new_context(values, {}, []), "json_mode": True})
    json_mode = values.get("mode") == "json"
    if json_mode:
        try:
            doc: Any = json.loads(values.get("json", ""))
        except ValueError as exc:
            problems = [("", f"the body is not JSON: {exc}")]
            return _again(request, values, problems, json_mode)
    else:
        doc = document_of(values)
    problems = await engine_call(request, lambda api: _submitted(api, doc))
    if problems:
        return _again(request, values, problems, json_mode)
    name = doc["metadata"]["name"]
    return RedirectResponse(_runs_url(request) + "/" + name, status_code=303)


def _again(
    request: Request, values: dict[str, str], problems: list[tuple[str, str]], json_mode: bool
) -> Response:
    """The form again, its values kept, each problem beside its field (JSON: each with its path)."""
    errors: dict[str, list[str]] = {}
    above: list[str] = []
    for path, message in problems:
        where = None if json_mode else field_of(path)
        if where is None:
            above.append(f"{path}: {message}" if path else message)
        else:
            errors.setdefault(where, []).append(message)
    context = {**new_context(values, errors, above), "json_mode": json_mode}
    return render(request, "new.html", context, status=422)


def _cancel(api: Scoped, name: str, delete: bool) -> bool:
    """Cancel (and ``delete``) the scope's run ``name`` as ``DELETE /runs/{name}`` does, audited."""
    key = api.key(name)
    if key not in api.engine.state.runs:
        return False
    now = api.clock.now()
    api.engine.cancel(key, now)
    source = _source_of(api.engine.meta[key].document)
    if delete:
        api.engine.delete(key, now)
    api.on_change()
    api.audit("delete" if delete else "cancel", "run", name, source=source)
    return True


@router.post(BASE + "/{name}/cancel")
async def cancel(request: Request, _who: Who, _form: Form, name: str) -> Response:
    """Cancel the run: its processes are stopped now; it stays, Cancelled."""
    if not await engine_call(request, lambda api: _cancel(api, name, delete=False)):
        raise NotHere(f"no run named {name}")
    return RedirectResponse(_runs_url(request) + "/" + name, status_code=303)


@router.post(BASE + "/{name}/delete")
async def delete(request: Request, _who: Who, _form: Form, name: str) -> Response:
    """Cancel and delete the run (``DELETE /runs/{name}``); back to the Runs page."""
    if not await engine_call(request, lambda api: _cancel(api, name, delete=True)):
        raise NotHere(f"no run named {name}")
    return RedirectResponse(_runs_url(request), status_code=303)


def _rerun(api: Scoped, name: str, failed: bool) -> tuple[str | None, str | None]:
    """``POST /runs/{name}/rerun``'s step (``api.rerun.rerun``): the run that starts, or why not."""
    try:
        return rerun_step(api, name, failed)[1], None
    except NotFound as exc:
        raise NotHere(str(exc)) from exc
    except RerunRefused as exc:
        return None, str(exc)


@router.post(BASE + "/{name}/rerun")
async def rerun(request: Request, _who: Who, form: Form, name: str) -> Response:
    """Run a finished run again (``failed=true``: only the copies that did not complete, in a new
    array); a refusal in the API's words (its 409), on a page of its own."""
    started, refused = await engine_call(request, lambda api: _rerun(api, name, form.get("failed") == "true"))
    if started is None:
        return render(request, "missing.html", {"message": refused}, status=409)
    return RedirectResponse(_runs_url(request) + "/" + started, status_code=303)
