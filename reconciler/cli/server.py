"""``astra server [stop]``: serve the local control plane, or stop the one of this folder.

Thin: options in, one call into ``reconciler.controlplane.server``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from .output import echo

__all__ = ["server_app"]

server_app = typer.Typer(
    name="server",
    help=(
        "Serve the local Astraeus control plane: the REST API and the scheduler, running workers as "
        "processes on this host.\n\nState lives under $ASTRA_HOME (else .astra/ of the current folder)."
    ),
    invoke_without_command=True,
    add_completion=False,
    rich_markup_mode=None,
)


@server_app.callback()
def server(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on (0: any free port).")] = 8750,
    db: Annotated[
        str | None, typer.Option("--db", help="SQLAlchemy URL (default: SQLite $ASTRA_HOME/astra.db).")
    ] = None,
    inventory: Annotated[
        str | None, typer.Option("--inventory", help="A YAML file of machines (default: the built-in one).")
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="ASTRA_TOKEN",
            help=(
                "The bearer token (default: $ASTRA_HOME/token, generated with mode 0600). The server "
                "starts over without it in its command line or environment."
            ),
        ),
    ] = None,
    token_file: Annotated[
        str | None,
        typer.Option("--token-file", help="Read the bearer token from this file (its first line)."),
    ] = None,
) -> None:
    """Run the control plane until stopped (Ctrl-C, or 'astra server stop')."""
    if ctx.invoked_subcommand is not None:
        return
    from ..controlplane.server import ServerError, read_token_file, reexec_without_token, serve
    from ..controlplane.store import StoreError

    try:
        if token_file is not None:
            token = read_token_file(token_file)
        elif token:
            args = ["--host", host, "--port", str(port)]
            args += ["--db", db] if db else []
            args += ["--inventory", inventory] if inventory else []
            reexec_without_token(token, args)
        serve(host=host, port=port, db=db, inventory=inventory, token=token)
    except (ServerError, StoreError) as exc:
        raise _Fail(str(exc)) from exc


class _Fail(typer.Exit):
    def __init__(self, message: str) -> None:
        from .output import error

        error(message)
        super().__init__(1)


@server_app.command()
def stop() -> None:
    """Stop the local control plane of this folder (or of $ASTRA_HOME); its workers are killed."""
    from ..controlplane.server import stop_server
    from ..home import astra_home

    home = astra_home()
    info = stop_server(home)
    if info is None:
        echo(f"no astra server runs for {home}")
    else:
        echo(f"astra server stopped (pid {info.pid}, {info.url})")
