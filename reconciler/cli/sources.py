"""``astra status`` and ``astra source list``: the reconcile sources a cluster (or ``--state``)
remembers, each source's status, lock and last apply, as a table or a listing.

Without typer: the bodies take ``flags.SourcesOptions`` and are run by the plain argv route
(``cli/__init__.py``) or by typer's commands made of the same options (``watch``, ``source``).
Neither ever starts the local server.

Must not touch: the sources' store (``reconciler.state``: read through ``planning.sources_store``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .output import echo
from .planning import failures, sources_store

if TYPE_CHECKING:
    from .flags import SourcesOptions

__all__ = ["list_command", "status_command"]


def _sources(options: SourcesOptions) -> tuple[Any, list[Any]]:
    """The store the options name, and its sources."""
    with failures():
        store = sources_store(options.state, options.server, options.token)
        return store, store.sources()


def status_command(options: SourcesOptions) -> int:
    """Each source's reconcile status: Ready, Reconciling, Stalled or Suspended, with its reason."""
    from .listing import print_listing

    store, sources = _sources(options)
    now = time.time()
    rows = [_status_row(src) for src in sources]
    if options.output != "table":
        print_listing(rows, options.output)
        return 0
    if not rows:
        echo(f"no sources yet in {store.address}")
        return 0
    from ..plan import duration_words

    table = [["SOURCE", "STATE", "REASON", "REVISION", "RUNS", "AGE", "LOCK", "MESSAGE"]]
    for r in rows:
        age = duration_words(now - r["updated_at"]) if r["updated_at"] else "-"
        lock = "-" if r["lock"] is None else f"{r['lock']['id']} ({r['lock']['owner']})"
        shown = _short(r["revision"])
        table.append([r["source"], r["state"], r["reason"], shown, str(r["runs"]), age, lock, r["message"]])
    _print_table(table)
    for r in rows:
        for h in r["held"]:
            echo(f"{r['source']}: replace held: {h['message']}")
    return 0


def _status_row(src: Any) -> dict[str, Any]:
    """One source as ``astra status`` lists it."""
    from ..state.suspension import suspended_words, suspension_of

    st = src.status
    held = suspension_of(st)
    return {
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


def _short(revision: str | None) -> str:
    """``main@sha1:3f8a819`` of ``main@sha1:3f8a819…`` (a sha256 of files: its first 12)."""
    if not revision:
        return "-"
    head, sep, rest = revision.partition("sha1:")
    if sep:
        return head + sep + rest[:7] + ("+dirty" if rest.endswith("+dirty") else "")
    return revision[:19]


def list_command(options: SourcesOptions) -> int:
    """List the sources: NAME RUNS STATE LOCK LAST-APPLY. Never starts the local server."""
    from .listing import print_listing

    store, sources = _sources(options)
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
    if options.output != "table":
        print_listing(rows, options.output)
        return 0
    if not rows:
        echo(f"no sources in {store.address}")
        return 0
    from ..plan import duration_words

    now = time.time()
    table = [["NAME", "RUNS", "STATE", "LOCK", "LAST APPLY"]]
    for r in rows:
        last = r["last_apply"]
        when = f"{duration_words(now - last['when'])} ago ({last['result']})" if last else "-"
        lock = "-" if r["lock"] is None else f"{r['lock']['id']} ({r['lock']['owner']})"
        table.append([r["name"], str(len(r["runs"])), r["state"] or "-", lock, when])
    _print_table(table)
    return 0


def _print_table(table: list[list[str]]) -> None:
    """Left-aligned columns, two spaces apart, the last one unpadded."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _state_of(status: dict) -> str | None:
    """The state shown: ``Suspended`` while the source is suspended, else its status's."""
    from ..state.suspension import suspension_of

    return "Suspended" if suspension_of(status) is not None else status.get("state")
