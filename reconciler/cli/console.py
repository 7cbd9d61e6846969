"""``astra console [RUN]``: open the Astraeus console in the browser, logged in.

Thin: asks the server (the local control plane, started on demand, or ``--server``) for a
one-time login link with the token (``POST /console/links``), and opens it: the browser gets a
session cookie and never sees the token. The link works once, for two minutes. With a
workspace's ``$WS_API`` as the server, the link leads to that workspace's Runs page; with the
server's root (or ``/api``), the server picks the token's own workspace. A refusal is one line
with the server's words.
"""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import unquote, urlsplit, urlunsplit

import typer

from .options import ApiServerOpt, TokenOpt
from .output import echo, error

__all__ = ["console", "console_root"]


def console(
    run: Annotated[str | None, typer.Argument(help="Open this run's page (default: the Runs page).")] = None,
    server: ApiServerOpt = None,
    token: TokenOpt = None,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Print the one-time link instead of opening it.")
    ] = False,
) -> None:
    """Open the console (the seeds' Runs page, or RUN's page), logged in with a one-time link.

    Examples:

        astra console

        astra console llama-ft
    """
    import webbrowser
    from urllib.parse import quote

    import httpx

    from ..clusters.decoders import detail_of
    from ..serverinfo import ServerError
    from .local_server import ensure_server

    try:
        url, tok = ensure_server(server, token)
    except ServerError as exc:
        error(str(exc))
        raise typer.Exit(1) from exc
    root, scope = console_root(url)
    if scope is not None:  # a workspace's $WS_API: its Runs page
        where = "/o/{}/w/{}/jobs/{}".format(*scope) + ("/" + quote(run, safe="") if run else "")
        params = {"next": where}
    else:  # the server picks the token's own workspace
        params = {"run": run} if run else {}
    try:
        made = httpx.post(
            root + "/console/links", params=params, headers={"Authorization": f"Bearer {tok}"}, timeout=30.0
        )
    except httpx.HTTPError as exc:
        error(f"cannot open the console of {root}: {reason_of(exc)}")
        raise typer.Exit(1) from exc
    if made.status_code != 200:
        error(f"cannot open the console of {root}: {made.status_code} {detail_of(made)}")
        raise typer.Exit(1)
    link = root + made.json()["path"]
    if no_browser or not webbrowser.open(link):
        echo(link)
        return
    shown = link.split("?next=", 1)[-1] if "?next=" in link else "/"
    echo(f"Opened {root}{unquote(shown)} in the browser (logged in with a one-time link)")


#: An API's base path: ``/api``, or a workspace's view of a cluster (``$WS_API``).
_BASE = re.compile(r"/api(?:/v1/orgs/([^/]+)/workspaces/([^/]+)/clusters/([^/]+)/api)?/*$")


def console_root(url: str) -> tuple[str, tuple[str, str, str] | None]:
    """The server's root (where ``/console/links`` is) and, when ``url`` is a workspace's
    ``$WS_API``, its org, workspace and cluster."""
    parts = urlsplit(url.rstrip("/"))
    found = _BASE.search(parts.path)
    path = parts.path[: found.start()] if found else parts.path
    root = urlunsplit((parts.scheme, parts.netloc, path, "", "")).rstrip("/")
    if found is None or found.group(1) is None:
        return root, None
    org, workspace, cluster = (unquote(g) for g in found.groups())
    return root, (org, workspace, cluster)


def reason_of(exc: Exception) -> str:
    """One line for a call that got no answer (httpx's own words name its class, not the cause)."""
    cause: BaseException = exc
    while cause.__context__ is not None and not str(cause):
        cause = cause.__context__
    text = str(cause).strip().splitlines()[-1:] or [type(exc).__name__]
    return f"no answer ({text[0]})"
