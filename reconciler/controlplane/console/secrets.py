"""The console's Secrets page: a workspace's secrets by name, which runs read each, set and delete.

Owns ``/o/{org}/w/{workspace}/secrets`` (GET: names, size, who set each and when, used by; for a
token that may write, a form to set one and a Delete button each) and its two writes (POST, with
the form's CSRF token; a read token is refused by ``pages.scoped``): set (the value field is a
password field, never filled in again; the answer is a redirect to the page, so no page or
history entry holds the value once the form is sent) and delete (refused, naming the runs that
read it, unless "even if used" is ticked). Each does what the API's route does, with its words
and its audit rows (``api.secrets``).

Must not touch: SQL and the key (the store's), rules of its own.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from ...runspec import secrets as spec
from ..api.context import ApiError, Scoped
from ..api.secrets import secret_users, set_value
from ..auth import Role
from ..store import NotFound
from .access import Viewer, checked_form
from .pages import engine_call, scoped
from .render import render

__all__ = ["router"]

router = APIRouter(include_in_schema=False)
PAGE = "/o/{org}/w/{workspace}/secrets"
Who = Annotated[Viewer, Depends(scoped)]
Form = Annotated[dict[str, str], Depends(checked_form)]


def _rows(api: Scoped) -> list[dict[str, Any]]:
    rows = api.engine.store.secret_rows(api.scope.workspace_key)
    return [{**r, "used_by": secret_users(api, r["name"])} for r in rows]


def _page(request: Request, who: Viewer, rows: list[dict[str, Any]], problem: str = "", status: int = 200):
    writes = who.who.may(Role.WRITE)
    context = {"secrets": rows, "writes": writes, "problem": problem, "value_max": spec.SECRET_VALUE_MAX}
    return render(request, "secrets.html", context, status=status)


def _back(request: Request) -> Response:
    org, workspace, _ = request.state.scoped.scope
    return RedirectResponse(PAGE.format(org=org, workspace=workspace), status_code=303)


@router.get(PAGE)
async def secrets_page(request: Request, who: Who) -> Response:
    """The workspace's secrets (never a value)."""
    return _page(request, who, await engine_call(request, _rows))


def _set(api: Scoped, name: str, value: bytes) -> str:
    """``PUT /secrets/{name}``'s checks and write (``api.secrets.set_value``); a problem in its
    words, or ``""``."""
    try:
        set_value(api, name, value)
    except ApiError as refused:
        body = refused.body.model_dump()
        return "; ".join(p["message"] for p in body) if isinstance(body, list) else str(body.get("detail"))
    return ""


@router.post(PAGE)
async def set_secret(request: Request, who: Who, form: Form) -> Response:
    """Set a secret from the form; back to the page (the value is not shown again)."""
    name, value = form.get("name", "").strip(), form.get("value", "").encode()
    problem = await engine_call(request, lambda api: _set(api, name, value))
    if problem:
        return _page(request, who, await engine_call(request, _rows), problem, 422)
    return _back(request)


def _delete(api: Scoped, name: str, force: bool) -> str:
    users = secret_users(api, name)
    if users and not force:
        runs = ("run " if len(users) == 1 else "runs ") + ", ".join(users)
        return f"secret {name!r} is in use by {runs}: delete them first, or tick 'even if used'"
    try:
        api.engine.store.delete_secret(name, api.scope.workspace_key)
    except NotFound as exc:
        return str(exc)
    api.audit("delete", "secret", name)
    return ""


@router.post(PAGE + "/{name}/delete")
async def delete_secret(request: Request, who: Who, form: Form, name: str) -> Response:
    """Delete a secret; refused while a run not ended reads it, unless forced."""
    problem = await engine_call(request, lambda api: _delete(api, name, form.get("force") == "true"))
    if problem:
        return _page(request, who, await engine_call(request, _rows), problem, 409)
    return _back(request)
