"""``astra console [RUN]``: open the Astraeus console in the browser, logged in.

Thin: asks the server (the local control plane, started on demand, or ``--server``) for a
one-time login link with the token (``POST /console/links``), and opens it: the browser gets a
session cookie and never sees the token. The link works once, for two minutes.
"""

from __future__ import annotations

from typing import Annotated

import typer

from .options import ApiServerOpt, TokenOpt
from .output import echo, error

__all__ = ["console"]


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

    from ..clusters.httpx_lean import httpx
    from ..serverinfo import ServerError
    from .local_server import ensure_server

    try:
        url, tok = ensure_server(server, token)
    except ServerError as exc:
        error(str(exc))
        raise typer.Exit(1) from exc
    root = url.rstrip("/")
    root = root[: -len("/api")] if root.endswith("/api") else root
    try:
        info = httpx.get(root + "/api/info", headers={"Authorization": f"Bearer {tok}"}, timeout=30.0)
        info.raise_for_status()
        scope = info.json()
        where = f"/o/{scope['org']}/w/{scope['workspace']}/jobs/{scope['cluster']}"
        if run:
            where += "/" + quote(run, safe="")
        made = httpx.post(
            root + "/console/links",
            params={"next": where},
            headers={"Authorization": f"Bearer {tok}"},
            timeout=30.0,
        )
        made.raise_for_status()
    except httpx.HTTPError as exc:
        error(f"cannot open the console of {root}: {exc}")
        raise typer.Exit(1) from exc
    link = root + made.json()["path"]
    if no_browser or not webbrowser.open(link):
        echo(link)
        return
    echo(f"Opened {root}{where} in the browser (logged in with a one-time link)")
