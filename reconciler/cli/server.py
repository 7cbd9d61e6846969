"""``astra server [start|stop|env]``: serve the local control plane; start it in the background,
stop it, or print the shell variables that the seeds' ``curl`` lines read.

Thin: options in, one call into ``reconciler.controlplane.server`` (serving, stopping) or
``reconciler.cli.local_server`` (finding and starting the local one).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from .options import ApiServerOpt, TokenOpt
from .output import echo

__all__ = ["server_app"]

server_app = typer.Typer(
    name="server",
    help=(
        "Serve the local Astraeus control plane: the REST API and the scheduler, running workers as "
        "processes on this host.\n\nState lives in astra's home: $ASTRA_HOME, else the nearest .astra/ "
        "upward from the current folder, else ~/.local/state/astra (one local cluster per user)."
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
    any_port_if_busy: Annotated[
        bool, typer.Option("--any-port-if-busy", hidden=True, help="When --port is taken, use any free one.")
    ] = False,
    db: Annotated[
        str | None, typer.Option("--db", help="SQLAlchemy URL (default: SQLite $ASTRA_HOME/astra.db).")
    ] = None,
    inventory: Annotated[
        list[str] | None,
        typer.Option(
            "--inventory",
            help="A YAML file of machines (default: the built-in one); NAME=FILE: cluster NAME's "
            "machines (repeatable), under .../clusters/NAME/api.",
        ),
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
    audit_keep: Annotated[
        int | None,
        typer.Option(
            "--audit-keep", min=1, help="Audit events kept per workspace, the newest (default 10000)."
        ),
    ] = None,
    work_root: Annotated[
        str | None,
        typer.Option(
            "--work-root",
            help="Where each run's own working folder is made, WORK_ROOT/RUN (default $ASTRA_HOME/work).",
        ),
    ] = None,
    secrets_key_file: Annotated[
        str | None,
        typer.Option(
            "--secrets-key-file",
            help="The key the workspaces' secrets are sealed with (default: $ASTRA_HOME/secrets.key, "
            "made with mode 0600 the first time).",
        ),
    ] = None,
    age_identity: Annotated[
        str | None,
        typer.Option(
            "--age-identity",
            help="An age identity file (age-keygen's): the server decrypts the age files of sources "
            "whose watch holds no identity (their secrets reach it still sealed).",
        ),
    ] = None,
) -> None:
    """Run the control plane until stopped (Ctrl-C, or 'astra server stop')."""
    # Over 60 lines: its signature is its ten options' one declaration (typer's), and the body
    # makes them one ServeOptions; the help text above is all a user sees of it.
    if ctx.invoked_subcommand is not None:
        return
    from ..controlplane.fleet import cluster_files
    from ..controlplane.server import ServeOptions, ServerError, read_token_file, reexec_without_token, serve
    from ..controlplane.store import StoreError

    try:
        files = cluster_files(inventory or ())
    except ValueError as exc:
        raise _Fail(str(exc)) from exc
    default = files.pop("default", None)
    options = ServeOptions(
        host=host,
        port=port,
        db=db,
        inventory=None if default is None else str(default),
        clusters={name: str(path) for name, path in files.items()},
        any_port_if_busy=any_port_if_busy,
        audit_keep=audit_keep,
        work_root=Path(work_root).resolve() if work_root else None,
        secrets_key_file=secrets_key_file,
        age_identity=age_identity,
    )
    try:
        if token_file is not None:
            token = read_token_file(token_file)
        elif token:
            reexec_without_token(token, _argv(options, inventory or ()))
        serve(options, token=token)
    except (ServerError, StoreError) as exc:
        raise _Fail(str(exc)) from exc


def _argv(options: Any, inventory: Sequence[str]) -> list[str]:
    """The command line of ``options`` (a ``ServeOptions``), as the server starts over with it
    (its token no longer in its command line or environment); ``inventory`` as given."""
    args = ["--host", options.host, "--port", str(options.port)]
    args += ["--any-port-if-busy"] if options.any_port_if_busy else []
    args += ["--db", options.db] if options.db else []
    args += [a for value in inventory for a in ("--inventory", value)]
    args += ["--audit-keep", str(options.audit_keep)] if options.audit_keep else []
    args += ["--work-root", str(options.work_root)] if options.work_root else []
    args += ["--secrets-key-file", options.secrets_key_file] if options.secrets_key_file else []
    args += ["--age-identity", options.age_identity] if options.age_identity else []
    return args


class _Fail(typer.Exit):
    def __init__(self, message: str) -> None:
        from .output import error

        error(message)
        super().__init__(1)


@server_app.command()
def stop() -> None:
    """Stop the local control plane (of astra's home); its workers are killed."""
    from ..controlplane.server import stop_server
    from ..home import astra_home

    home = astra_home()
    info = stop_server(home)
    if info is None:
        echo(f"no astra server runs for {home}")
    else:
        echo(f"astra server stopped (pid {info.pid}, {info.url}, home {home})")


@server_app.command()
def start() -> None:
    """Start the local control plane in the background, unless it runs already (as 'astra apply'
    would); say where it is and how to stop it."""
    from ..home import astra_home
    from ..serverinfo import ServerError, read_port
    from .local_server import local_server, start_local_server
    from .port_words import holder_of, moved_words

    home = astra_home()
    url = local_server(home)
    if url is not None:
        echo(f"astra server already runs at {url} (home {home}); 'astra server stop' stops it")
        return
    asked = read_port(home)
    try:
        url, _ = start_local_server(home, announce=False)
    except ServerError as exc:
        raise _Fail(str(exc)) from exc
    moved = moved_words(asked, url, holder_of(asked))
    if moved is not None:
        echo(moved, err=True)
    log = home / "server.log"
    echo(f"astra server started at {url} (home {home}, log {log}); 'astra server stop' stops it")


@server_app.command()
def env(
    server: ApiServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Print the shell variables the seeds' curl lines read: eval "$(astra server env)".

    API (the default workspace's API), WS_API (the same, by org, workspace and cluster),
    ASTRA_TOKEN and ASTRAEUS_TOKEN (the bearer token). Starts the local server if none runs.
    """
    import shlex

    from ..serverinfo import ServerError
    from ..wire import WS_API, api_base
    from .local_server import ensure_server

    try:
        url, tok = ensure_server(server, token)
    except ServerError as exc:
        raise _Fail(str(exc)) from exc
    if not url.startswith(("http://", "https://")):
        raise _Fail(f"{url} is not an Astraeus API: its variables are for http(s):// servers")
    api = api_base(url)
    root = api.removesuffix("/api") if api.endswith("/api") and "/clusters/" not in api else None
    ws = root + WS_API.format(org="default", workspace="default", cluster="default") if root else api
    pairs = {"API": api, "WS_API": ws, "ASTRA_TOKEN": tok or "", "ASTRAEUS_TOKEN": tok or ""}
    echo("export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in pairs.items()))


@server_app.command("rotate-secrets-key")
def rotate_secrets_key(
    server: ApiServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Seal every workspace's secrets anew with a new key (the server's token only); runs and
    their secrets go on as before. The old key file is replaced once every value is sealed."""
    from .remote import CommandError, call

    try:
        done = call("POST", "/secrets:rotate-key", server=server, token=token).json()
    except CommandError as exc:
        raise _Fail(str(exc)) from exc
    echo(f"secrets key rotated: {done['secrets']} secrets sealed with key {done['key_id']}")
