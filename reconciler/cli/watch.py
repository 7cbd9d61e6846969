"""``astra watch``, ``astra status`` and ``astra force-unlock``: thin commands over ``reconciler.loop``
and ``reconciler.state``."""

from __future__ import annotations

import time

from . import flags
from .listing import ListFormat, ListOutput, print_listing
from .options import ServerOpt, TokenOpt
from .output import echo
from .plan import (
    StateUrl,
)
from .planning import failures, setup

__all__ = ["force_unlock", "status", "watch"]


def _watch(options: flags.WatchOptions) -> int:
    from .watching import watch_command

    return watch_command(
        list(options.paths),
        interval=options.interval,
        template=options.template,
        sets=list(options.sets),
        prune=options.prune,
        allow_empty=options.allow_empty,
        once=options.once,
        source=options.source,
        state=options.state,
        server=options.server,
        token=options.token,
        git=options.git,
        ref=options.ref,
        folder=options.path,
        git_token_file=options.git_token_file,
        config=options.config,
        webhook_secret_file=options.webhook_secret_file,
        age_identity=options.age_identity,
    )


watch = flags.typer_command(
    flags.WatchOptions,
    _watch,
    "watch",
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
    """,
)


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
                "held": list(st.get("held") or []),
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
    for r in rows:
        for h in r["held"]:
            echo(f"{r['source']}: replace held: {h['message']}")


def _short(revision: str | None) -> str:
    """``main@sha1:3f8a819`` of ``main@sha1:3f8a819…`` (a sha256 of files: its first 12)."""
    if not revision:
        return "-"
    head, sep, rest = revision.partition("sha1:")
    if sep:
        return head + sep + rest[:7] + ("+dirty" if rest.endswith("+dirty") else "")
    return revision[:19]


def _force_unlock(options: flags.UnlockOptions) -> int:
    from .applying import force_unlock_command

    return force_unlock_command(options)


force_unlock = flags.typer_command(
    flags.UnlockOptions,
    _force_unlock,
    "force_unlock",
    "Clear a stale apply lock (left by an apply that was killed). Be sure no apply is running.",
)
