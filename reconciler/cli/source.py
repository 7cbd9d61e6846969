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

from .listing import ListFormat, ListOutput, print_listing
from .options import ServerOpt, TokenOpt
from .output import echo
from .plan import SourceName, StateUrl
from .planning import failures, setup

__all__ = ["source_app"]

source_app = typer.Typer(
    name="source",
    help="The reconcile sources the cluster remembers: what each applied, its lock, its status.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


@source_app.command("list")
def list_sources(
    output: ListOutput = ListFormat.table,
    state: StateUrl = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """List the sources: NAME RUNS STATE LOCK LAST-APPLY. Never starts the local server."""
    with failures():
        s = setup(["."], source="-", state=state, server=server, token=token, start=False)
        sources = s.store.sources()
    rows = [
        {
            "name": src.name,
            "runs": sorted(src.inventory),
            "state": _state_of(src.status),
            "lock": None if src.lock is None else src.lock.to_json(),
            "last_apply": None if not src.history else src.history[-1].to_json(),
        }
        for src in sources
    ]
    if output is not ListFormat.table:
        print_listing(rows, output)
        return
    if not rows:
        echo(f"no sources in {s.store.address}")
        return
    from ..plan import duration_words

    now = time.time()
    table = [["NAME", "RUNS", "STATE", "LOCK", "LAST APPLY"]]
    for r in rows:
        last = r["last_apply"]
        when = f"{duration_words(now - last['when'])} ago ({last['result']})" if last else "-"
        lock = "-" if r["lock"] is None else f"{r['lock']['id']} ({r['lock']['owner']})"
        table.append([r["name"], str(len(r["runs"])), r["state"] or "-", lock, when])
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _state_of(status: dict) -> str | None:
    """The state shown: ``Suspended`` while the source is suspended, else its status's."""
    from ..state.suspension import suspension_of

    return "Suspended" if suspension_of(status) is not None else status.get("state")


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
