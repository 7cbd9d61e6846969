"""``astra watch``, ``astra status`` and ``astra force-unlock``: thin commands over ``reconciler.loop``
and ``reconciler.state``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from .applying import force_unlock_command
from .listing import ListFormat, ListOutput, print_listing
from .options import ServerOpt, TokenOpt
from .output import echo
from .plan import (
    AllowEmpty,
    GitPath,
    GitRef,
    GitTokenFile,
    GitUrl,
    Prune,
    SourceName,
    StateUrl,
    failures,
    setup,
)

__all__ = ["force_unlock", "print_status", "status", "watch"]


def watch(
    paths: Annotated[
        list[Path] | None, typer.Argument(help="Files or folders to watch.", show_default=False)
    ] = None,
    interval: Annotated[
        str,
        typer.Option(
            "--interval",
            help="Between full resyncs (±10% jitter; --git: a fetch at each): 1m, 30s, or seconds.",
        ),
    ] = "5m",
    template: Annotated[
        str | None, typer.Option("--template", help="Apply this template to every run.")
    ] = None,
    sets: Annotated[list[str] | None, typer.Option("--set", help="A template parameter, key=value.")] = None,
    prune: Prune = False,
    allow_empty: AllowEmpty = False,
    once: Annotated[bool, typer.Option("--once", help="Reconcile once and exit (1 unless Ready).")] = False,
    source: SourceName = None,
    state: StateUrl = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
    git: GitUrl = None,
    ref: GitRef = None,
    path: GitPath = None,
    git_token_file: GitTokenFile = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", "-c", help="astra.yaml: several sources, each with its own status and lock."
        ),
    ] = None,
    webhook_secret_file: Annotated[
        str | None,
        typer.Option(
            "--webhook-secret-file",
            help="A file with the secret that signs POST /sources/NAME/hook (a signed call: a pass now).",
        ),
    ] = None,
) -> None:
    """Keep the cluster equal to the files: apply on every change, and resync every --interval.

    A change to one file re-plans only the runs that file holds. With --git URL, the remote's
    --ref is fetched at every resync and exactly the fetched commit's tree is applied; an
    unreachable remote leaves the runs alone (SourceFetchFailed) and is retried with backoff.
    With -c astra.yaml, every source it declares is reconciled, each on its own. A run that
    fails to apply is retried with its own backoff; files that do not load or validate stall
    the source until they change. 'astra status' shows each source's state. Stop with Ctrl-C.

    Examples:

        astra watch runs/

        astra watch --git https://github.com/acme/runs.git --ref main --path runs --interval 1m

        astra watch -c astra.yaml
    """
    from .watching import watch_command

    raise typer.Exit(
        watch_command(
            [str(p) for p in paths or []],
            interval=interval,
            template=template,
            sets=sets,
            prune=prune,
            allow_empty=allow_empty,
            once=once,
            source=source,
            state=state,
            server=server,
            token=token,
            git=git,
            ref=ref,
            folder=path,
            git_token_file=git_token_file,
            config=None if config is None else str(config),
            webhook_secret_file=webhook_secret_file,
        )
    )


def print_status(name: str, status: dict[str, Any]) -> None:
    stamp = time.strftime("%H:%M:%S", time.localtime(status.get("updated_at") or time.time()))
    state, reason = status.get("state"), status.get("reason")
    line = f"{stamp} {name}: {state}" + ("" if reason == state else f" {reason}")
    if status.get("message"):
        line += f": {status['message']}"
    echo(line)


def status(
    output: ListOutput = ListFormat.table,
    state: StateUrl = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Each source's reconcile status: Ready, Reconciling, Stalled or Suspended, with its reason."""
    from ..state.suspension import suspended_words, suspension_of

    with failures():
        s = setup(["."], source="-", state=state, server=server, token=token, start=False)
        sources = s.store.sources()
    now = time.time()
    rows = []
    for src in sources:
        st = src.status
        held = suspension_of(st)
        rows.append(
            {
                "source": src.name,
                "state": st.get("state", "Unknown") if held is None else "Suspended",
                "reason": st.get("reason", "") if held is None else "Suspended",
                "message": st.get("message", "") if held is None else suspended_words(src.name, held),
                "suspended": None if held is None else held.to_json(),
                "updated_at": st.get("updated_at"),
                "runs": len(src.inventory),
                "revision": st.get("revision"),
                "lock": None if src.lock is None else src.lock.to_json(),
                "last_apply": None if not src.history else src.history[-1].to_json(),
            }
        )
    if output is not ListFormat.table:
        print_listing(rows, output)
        return
    if not rows:
        echo(f"no sources yet in {s.store.address}")
        return
    from ..plan import duration_words

    table = [["SOURCE", "STATE", "REASON", "REVISION", "RUNS", "AGE", "LOCK", "MESSAGE"]]
    for r in rows:
        age = duration_words(now - r["updated_at"]) if r["updated_at"] else "-"
        lock = "-" if r["lock"] is None else f"{r['lock']['id']} ({r['lock']['owner']})"
        shown = _short(r["revision"])
        table.append([r["source"], r["state"], r["reason"], shown, str(r["runs"]), age, lock, r["message"]])
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _short(revision: str | None) -> str:
    """``main@sha1:3f8a819`` of ``main@sha1:3f8a819…`` (a sha256 of files: its first 12)."""
    if not revision:
        return "-"
    head, sep, rest = revision.partition("sha1:")
    if sep:
        return head + sep + rest[:7] + ("+dirty" if rest.endswith("+dirty") else "")
    return revision[:19]


def force_unlock(
    lock_id: Annotated[
        str, typer.Argument(metavar="ID", help="The lock's id, as the refused apply said it.")
    ],
    source: SourceName = None,
    state: StateUrl = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Clear a stale apply lock (left by an apply that was killed). Be sure no apply is running."""
    raise typer.Exit(force_unlock_command(lock_id, source, state, server, token))
