"""Who may see the console: the login page, the session cookie, one-time links, the CSRF token.

Owns ``ConsoleAccess`` (the server's sessions and one-time codes, in its memory only: a
restarted server asks for the token again), ``viewer`` (the dependency every page takes: a
session cookie, or the API's ``Authorization: Bearer`` header, else the login page), ``checked_form``
(a POST's form, its CSRF token held to the session's) and the routes ``/login``, ``/logout`` and
``/login/once/{code}``, and ``POST /console/links`` (with the bearer token: a one-time link, what
``astra console`` opens).

The token is given once, on the login page (a POST from this server's own page only:
``origin.cross_origin``, against login CSRF); the cookie (``astra_session``: HttpOnly,
SameSite=Strict, Path=/) names a random session, never the token. A request with the bearer
header carries no cookie the browser would send by itself, so it needs no CSRF token; a form sent
with the cookie must carry its session's. A session and a one-time link keep the token's key
(its digest), and who it is, is asked of the token store on every request: a revoked token's
sessions and unused links end at once. Must not touch: the engine, what a page shows.
"""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass, field
from typing import Annotated
from urllib.parse import parse_qs, quote, urlsplit

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from ..api.context import ApiContext, ApiError
from ..auth import Identity
from ..scopes import DEFAULT
from .origin import cross_origin
from .render import render

__all__ = [
    "COOKIE",
    "ConsoleAccess",
    "LoginNeeded",
    "Viewer",
    "checked_form",
    "login_redirect",
    "router",
    "viewer",
]

#: The Runs page's path (the seeds' console URL of a workspace's runs on a cluster).
BASE = "/o/{org}/w/{workspace}/jobs/{cluster}"
#: The session cookie's name.
COOKIE = "astra_session"
#: How long a one-time link may wait to be opened (seconds).
ONCE_TTL = 120.0
#: How long a session lasts without being used (seconds).
SESSION_TTL = 12 * 3600.0
#: The largest form the console reads (a run document in Edit as JSON included).
FORM_MAX_BYTES = 1 << 20


@dataclass
class ConsoleAccess:
    """The console's sessions (id → its CSRF token, when last seen, and the key of the token it
    was opened with: ``Tokens.holder``'s digest) and one-time codes (code → when made, the key of
    the token that asked). Who a key is, is asked of the token store on every use
    (``Tokens.held``): a revoked token's sessions and links end with it."""

    sessions: dict[str, tuple[str, float, str]] = field(default_factory=dict)
    once: dict[str, tuple[float, str]] = field(default_factory=dict)

    def open_session(self, key: str) -> str:
        now = time.monotonic()
        self.sessions = {k: v for k, v in self.sessions.items() if now - v[1] <= SESSION_TTL}
        sid = secrets.token_urlsafe(32)
        self.sessions[sid] = (secrets.token_urlsafe(24), now, key)
        return sid

    def session(self, sid: str | None) -> tuple[str, str] | None:
        """The session's CSRF token and its token's key (the session kept alive); ``None``: none."""
        held = self.sessions.get(sid or "")
        if held is None or time.monotonic() - held[1] > SESSION_TTL:
            self.sessions.pop(sid or "", None)
            return None
        self.sessions[sid or ""] = (held[0], time.monotonic(), held[2])
        return held[0], held[2]

    def new_link_code(self, key: str) -> str:
        now = time.monotonic()
        self.once = {c: t for c, t in self.once.items() if now - t[0] < ONCE_TTL}
        code = secrets.token_urlsafe(32)
        self.once[code] = (now, key)
        return code

    def use_link_code(self, code: str) -> str | None:
        """The key of the token that asked for the link ``code``; ``None`` when it was used
        already or is too old."""
        made = self.once.pop(code, None)
        return made[1] if made is not None and time.monotonic() - made[0] < ONCE_TTL else None


@dataclass(frozen=True)
class Viewer:
    """Who is looking (the token's identity: its scope and role): by session (``csrf`` its
    token) or by bearer header (``csrf`` None)."""

    csrf: str | None
    who: Identity


def access_of(request: Request) -> ConsoleAccess:
    return request.app.state.console_access


def api_of(request: Request) -> ApiContext:
    return request.app.state.astra


class LoginNeeded(Exception):
    """Raised by ``viewer``: the page answers the login page's redirect (``next``: where to come back)."""

    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.where = where


async def viewer(request: Request) -> Viewer:
    """A session cookie's viewer, or the bearer header's (401/403 as the API's when it is wrong);
    without either, ``LoginNeeded``."""
    if "authorization" in request.headers:
        return Viewer(csrf=None, who=bearer(request))
    sid = request.cookies.get(COOKIE)
    held = access_of(request).session(sid)
    who = None if held is None else api_of(request).tokens.held(held[1])
    if held is None or who is None:  # none, too old, or its token was revoked since
        access_of(request).sessions.pop(sid or "", None)
        raise LoginNeeded(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
    request.state.csrf, request.state.signed_in = held[0], True
    return Viewer(csrf=held[0], who=who)


async def checked_form(request: Request, who: Annotated[Viewer, Depends(viewer)]) -> dict[str, str]:
    """The POST's form fields (``application/x-www-form-urlencoded``, one value each), its CSRF
    token checked for a session's viewer (403 when missing or another)."""
    fields = await form_fields(request)
    if who.csrf is not None and not hmac.compare_digest(fields.get("csrf", "").encode(), who.csrf.encode()):
        raise ApiError(403, _detail("the form's CSRF token is missing or stale: reload the page"))
    return fields


async def form_fields(request: Request) -> dict[str, str]:
    """A form's fields (``application/x-www-form-urlencoded``; the last value of each), read
    up to ``FORM_MAX_BYTES`` (413 past it: the body is not read further)."""
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > FORM_MAX_BYTES:
            raise ApiError(413, _detail("the form is larger than 1 MiB"))
    pairs = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[-1] for k, v in pairs.items()}


def bearer(request: Request) -> Identity:
    """Who ``Authorization: Bearer TOKEN`` is (the API's 401 and words for a token this server
    does not know); what it may see is held by the page (``pages.scoped``)."""
    return bearer_key(request)[0]


def bearer_key(request: Request) -> tuple[Identity, str]:
    """``bearer``'s identity, and the token's key (``Tokens.holder``) a one-time link keeps."""
    given = request.headers.get("authorization", "")
    scheme, _, value = given.partition(" ")
    tokens = api_of(request).tokens
    key = tokens.holder(value.strip()) if scheme.lower() == "bearer" else None
    who = None if key is None else tokens.held(key)
    if key is None or who is None:
        what = "an unknown (or revoked) token" if given else "no token"
        raise ApiError(
            401, _detail(f"{what}: send 'Authorization: Bearer TOKEN'"), {"WWW-Authenticate": "Bearer"}
        )
    return who, key


def _detail(text: str):  # a wire.Detail, imported here only (the models import pydantic)
    from ...wire import models as wire

    return wire.Detail(detail=text)


def _local(where: str | None) -> str:
    """``where`` if it is a path on this server, else the console's start page (no open redirect:
    not ``//host``, nor ``/\\host`` or a control character, which browsers read as ``//host``)."""
    if (
        where
        and where.startswith("/")
        and not where.startswith("//")
        and not urlsplit(where).netloc
        and "\\" not in where
        and where.isprintable()
    ):
        return where
    return "/"


def _signed_in(request: Request, where: str, key: str) -> Response:
    sid = access_of(request).open_session(key)
    out = RedirectResponse(_local(where), status_code=303)
    secure = request.url.scheme == "https"
    out.set_cookie(COOKIE, sid, httponly=True, samesite="strict", path="/", secure=secure)
    return out


router = APIRouter(include_in_schema=False)


@router.get("/login")
async def login_page(request: Request, next: str = "/") -> Response:
    return render(request, "login.html", {"next": _local(next), "error": None})


@router.post("/login")
async def login(request: Request) -> Response:
    refused = cross_origin(request)
    if refused is not None:  # login CSRF: another site's form would sign the visitor in as its token
        return render(request, "login.html", {"next": "/", "error": refused}, status=403)
    fields = await form_fields(request)
    given, where = fields.get("token", "").strip(), _local(fields.get("next"))
    key = api_of(request).tokens.holder(given) if given else None
    if key is None:
        context = {"next": where, "error": "That is not a token of this server."}
        return render(request, "login.html", context, status=401)
    return _signed_in(request, where, key)


@router.get("/login/once/{code}")
async def login_once(request: Request, code: str, next: str = "/") -> Response:
    key = access_of(request).use_link_code(code)
    if key is None or api_of(request).tokens.held(key) is None:  # its token revoked since: no login
        context = {"next": _local(next), "error": "That link was used already, or is too old."}
        return render(request, "login.html", context, status=401)
    return _signed_in(request, next, key)


@router.post("/logout")
async def logout(request: Request, fields: Annotated[dict[str, str], Depends(checked_form)]) -> Response:
    access_of(request).sessions.pop(request.cookies.get(COOKIE, ""), None)
    out = RedirectResponse("/login", status_code=303)
    out.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return out


@router.post("/console/links")
async def one_time_link(request: Request) -> Response:
    """A one-time login link (bearer token only): ``{"path": "/login/once/CODE?next=…"}``.

    ``?next=PATH``: where the link leads; without it, the Runs page of the token's workspace
    (an org's token: ``default``) on the default cluster, or ``?run=NAME``'s page there."""
    who, key = bearer_key(request)
    query = parse_qs(urlsplit(str(request.url)).query)
    if "next" in query:
        where = _local(query["next"][-1])
    else:
        run = query.get("run", [""])[-1]
        where = BASE.format(org=who.org, workspace=who.workspace or DEFAULT, cluster=DEFAULT)
        where += "/" + quote(run, safe="") if run else ""
    code = access_of(request).new_link_code(key)
    return JSONResponse({"path": f"/login/once/{code}?next={quote(where, safe='/')}"})


def login_redirect(where: str) -> Response:
    """The login page, coming back to ``where`` once signed in."""
    return RedirectResponse(f"/login?next={quote(where, safe='/')}", status_code=303)
