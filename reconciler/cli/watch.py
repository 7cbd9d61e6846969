"""``astra watch``, ``astra status`` and ``astra force-unlock``: thin commands over ``reconciler.loop``
and ``reconciler.state``."""

from __future__ import annotations

import json
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from .output import echo
from .plan import AllowEmpty, Prune, Server, SourceName, StateUrl, Token, failures, setup

__all__ = ["force_unlock", "status", "watch"]


class ListFormat(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


def watch(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders to watch.", show_default=False)],
    interval: Annotated[
        float,
        typer.Option("--interval", help="Seconds between full resyncs (±10% jitter), which undo drift."),
    ] = 300.0,
    template: Annotated[
        str | None, typer.Option("--template", help="Apply this template to every run.")
    ] = None,
    sets: Annotated[list[str] | None, typer.Option("--set", help="A template parameter, key=value.")] = None,
    prune: Prune = False,
    allow_empty: AllowEmpty = False,
    once: Annotated[bool, typer.Option("--once", help="Reconcile once and exit (1 unless Ready).")] = False,
    source: SourceName = None,
    state: StateUrl = None,
    server: Server = None,
    token: Token = None,
) -> None:
    """Keep the cluster equal to the files: apply on every change, and resync every --interval.

    A change to one file re-plans only the runs that file holds. A run that fails to apply is
    retried with its own backoff; files that do not load or validate stall the source until
    they change. 'astra status' shows each source's state. Stop with Ctrl-C.
    """
    from ..load import default_cache
    from ..loop import FileEvents, Reconciler, Watch
    from ..state import git_commit, owner

    names = [str(p) for p in paths]
    with failures():
        s = setup(
            names,
            source=source,
            state=state,
            server=server,
            token=token,
            template=template,
            sets=sets,
            prune=prune,
            allow_empty=allow_empty,
        )
        reconciler = Reconciler(
            s.source,
            s.cluster,
            s.store,
            clock=time.time,
            who=owner(),
            cache=default_cache(),
            commit=lambda: git_commit(names),
        )
        if once:
            status = reconciler.reconcile_once()
            _print_status(s.source.name, status)
            raise typer.Exit(0 if status.get("state") == "Ready" else 1)
        echo(f"watching {', '.join(names)} as source {s.source.name} on {s.cluster.address} (Ctrl-C stops)")
        Watch(
            reconciler,
            FileEvents(names),
            interval=interval,
            clock=time.time,
            on_status=lambda st: _print_status(s.source.name, st),
        ).run()


def _print_status(name: str, status: dict[str, Any]) -> None:
    stamp = time.strftime("%H:%M:%S", time.localtime(status.get("updated_at") or time.time()))
    line = f"{stamp} {name}: {status.get('state')} {status.get('reason')}"
    if status.get("message"):
        line += f": {status['message']}"
    echo(line)


def status(
    output: Annotated[
        ListFormat, typer.Option("--output", "-o", help="table, json or yaml.")
    ] = ListFormat.table,
    state: StateUrl = None,
    server: Server = None,
    token: Token = None,
) -> None:
    """Each source's reconcile status: Ready, Reconciling or Stalled, with its reason."""
    with failures():
        s = setup(["."], source="-", state=state, server=server, token=token)
        sources = s.store.sources()
    now = time.time()
    rows = []
    for src in sources:
        st = src.status
        rows.append(
            {
                "source": src.name,
                "state": st.get("state", "Unknown"),
                "reason": st.get("reason", ""),
                "message": st.get("message", ""),
                "updated_at": st.get("updated_at"),
                "runs": len(src.inventory),
                "lock": None if src.lock is None else src.lock.to_json(),
                "last_apply": None if not src.history else src.history[-1].to_json(),
            }
        )
    if output is ListFormat.json:
        echo(json.dumps(rows, indent=2, sort_keys=True))
        return
    if output is ListFormat.yaml:
        from ..desired import to_yaml

        echo(to_yaml([{"sources": rows}]).rstrip("\n"))
        return
    if not rows:
        echo(f"no sources yet in {s.store.address}")
        return
    from ..plan import duration_words

    table = [["SOURCE", "STATE", "REASON", "RUNS", "AGE", "LOCK", "MESSAGE"]]
    for r in rows:
        age = duration_words(now - r["updated_at"]) if r["updated_at"] else "-"
        lock = "-" if r["lock"] is None else f"{r['lock']['id']} ({r['lock']['owner']})"
        table.append([r["source"], r["state"], r["reason"], str(r["runs"]), age, lock, r["message"]])
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def force_unlock(
    lock_id: Annotated[
        str, typer.Argument(metavar="ID", help="The lock's id, as the refused apply said it.")
    ],
    source: SourceName = None,
    state: StateUrl = None,
    server: Server = None,
    token: Token = None,
) -> None:
    """Clear a stale apply lock (left by an apply that was killed). Be sure no apply is running."""
    from ..state import StateError

    with failures():
        s = setup(["."], source=source or "-", state=state, server=server, token=token)
        name = source
        if name is None:
            held = [src.name for src in s.store.sources() if src.lock is not None and src.lock.id == lock_id]
            if not held:
                raise StateError(f"no source holds lock {lock_id}")
            name = held[0]
        s.store.unlock(name, lock_id)
    echo(f"lock {lock_id} of source {name} cleared")
