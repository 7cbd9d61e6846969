"""The Astraeus console: server-rendered pages beside the REST API, on the same server.

The seeds' console: the Runs page of a workspace, a run with its Workers tab and each worker's
Log, New → Run, and beyond the seeds a GitOps view (Sources) and the Cluster's GPU map and
queue. Pages read the engine through the API's own makers of ``wire`` models (``api.views``),
holding the engine's gate as the API's routes do; writes go through the API's validator. Plain
jinja2 templates (autoescaped) and a little plain JavaScript and CSS shipped in the package: no
build step, no CDN.

==============  ===================================================================================
module          owns
==============  ===================================================================================
``access``      the login page, the session cookie, one-time links, the CSRF token
``origin``      whether a browser sent a form from another site (the login form's guard)
``pages``       the pages (GET), the gate's use, the paths
``actions``     the writes (POST): New → Run, cancel, delete
``secrets``     the Secrets page: names, used by, set and delete (never a value)
``reads``       what a page shows, as ``wire`` models, one page at a time
``form``        the New → Run form's fields as a run document; a problem's path → its field
``render``      the jinja2 environment (autoescape), its filters, the pages' headers
==============  ===================================================================================

``mount(app)`` adds it to the API's app (``api.create_app`` calls it). Must not touch: the
engine's rules, SQL, the API's routes.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles

from . import access, actions, pages, secrets, usage_page
from .access import ConsoleAccess, LoginNeeded, login_redirect
from .pages import NotHere
from .render import render

__all__ = ["mount"]


def mount(app: FastAPI) -> None:
    """The console's routes, its static files (``/console/static``) and its two answers
    (the login page for a viewer with neither cookie nor token; a 404 page) on ``app``."""
    app.state.console_access = ConsoleAccess()
    app.include_router(access.router)
    app.include_router(pages.router)
    app.include_router(actions.router)
    app.include_router(secrets.router)
    app.include_router(usage_page.router)
    static = StaticFiles(packages=[("reconciler.controlplane.console", "static")])
    app.mount("/console/static", static, name="console-static")
    app.add_exception_handler(LoginNeeded, _login)
    app.add_exception_handler(NotHere, _not_here)
    app.add_api_route("/favicon.ico", _favicon, methods=["GET"], include_in_schema=False)


async def _favicon() -> Response:
    """The console's icon where browsers look for it first (no login: it says nothing)."""
    from importlib.resources import files

    icon = files("reconciler.controlplane.console").joinpath("static", "favicon.svg").read_bytes()
    return Response(icon, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})


async def _login(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, LoginNeeded)
    return login_redirect(exc.where)


async def _not_here(request: Request, exc: Exception) -> Response:
    return render(request, "missing.html", {"message": str(exc)}, status=404)
