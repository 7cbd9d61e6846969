"""``astra source list | delete | suspend | resume NAME | adopt RUN...``: the reconcile sources a
cluster (or ``--state``) remembers.

Thin: options in, one call into the source's store (``reconciler.state``, ``reconciler.owners``),
a table out. A source left by a mistake (``astra watch nosuchdir``, a renamed folder) is listed
here and deleted here; a run another source applied is moved to this one here (``adopt``).
"""

from __future__ import annotations

import time
from typing import Annotated

import typer

from . import flags
from .options import ServerOpt, TokenOpt
from .output import echo
from .plan import SourceName, StateUrl
from .planning import failures, setup
from .sources import list_command

__all__ = ["source_app"]

source_app = typer.Typer(
    name="source",
    help="The reconcile sources the cluster remembers: what each applied, its lock, its status.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


source_app.command("list")(
    flags.typer_command(flags.SourcesOptions, list_command, "list_sources", list_command.__doc__ or "")
)


@source_app.command("delete")
def delete(
    name: Annotated[str, typer.Argument(help="The source's name, as 'astra source list' shows it.")],
    keep_runs: Annotated[
        bool,
        typer.Option("--keep-runs", help="Delete it though it owns runs: they stay, owned by no source."),
    ] = False,
    state: StateUrl = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Forget a source: what it applied (its inventory), its status and its history.

    Refused while it holds its apply lock, and while it owns runs (prune them first, or give
    --keep-runs). The runs themselves are never touched.
    """
    with failures():
        s = setup(["."], source=name, state=state, server=server, token=token)
        s.store.delete(name, keep_runs=keep_runs)
    echo(f"source {name} deleted")


@source_app.command("suspend")
def suspend(
    name: Annotated[str, typer.Argument(help="The source's name, as 'astra source list' shows it.")],
    reason: Annotated[
        str, typer.Option("--reason", help="Why, in words: said in its status and the console.")
    ] = "",
    state: StateUrl = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Stop the source's reconcile passes (file events, webhook, resync, retries) until resumed.

    Nothing is applied to it or pruned from it meanwhile; its runs keep running. Needs none of
    its files (it works when they, or astra.yaml, are broken). 'astra source resume NAME' ends it.
    """
    from ..state import owner
    from ..state.suspension import Suspension

    with failures():
        s = setup(["."], source=name, state=state, server=server, token=token)
        s.store.suspend(name, Suspension(owner(), time.time(), reason).to_json())
    echo(f"source {name} suspended: no pass runs until 'astra source resume {name}'")


@source_app.command("resume")
def resume(
    name: Annotated[str, typer.Argument(help="The source's name, as 'astra source list' shows it.")],
    state: StateUrl = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Resume a suspended source: its watch's next pass is a full one (a remote's newest commit)."""
    with failures():
        s = setup(["."], source=name, state=state, server=server, token=token)
        s.store.suspend(name, None)
    echo(f"source {name} resumed: its watch's next pass is a full one")


@source_app.command("adopt")
def adopt(
    runs: Annotated[list[str], typer.Argument(help="The runs to take over, as another source applied them.")],
    source: SourceName = None,
    state: StateUrl = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Move runs another source applied into this source (--source; default: the current
    folder's): from now on this source plans, updates and prunes them, and the other one no
    longer does. The runs themselves are not touched.

    Examples:

        astra source adopt shared-run --source src-y
    """
    from ..owners import adopt as move
    from ..state import owner

    with failures():
        s = setup(["."], source=source, state=state, server=server, token=token)
        moved = move(s.store, runs, s.source.name, who=owner(), now=time.time())
    for name in sorted(moved):
        echo(f"{name}: adopted by source {s.source.name} from source {moved[name]}")
