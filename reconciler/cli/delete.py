"""``astra delete RUN...``: cancel runs and delete them, after saying what that means.

It asks first (only ``yes`` goes on; ``--yes`` skips the question; without a terminal to ask on,
``--yes`` is needed). A run that a source applied (astra's ``astra.source`` annotation) is named
with its source and file: the next ``astra apply`` or watch pass of that source creates it
again unless its file goes too. Every run named must exist before any is deleted.

A run deleted here leaves its source's inventory too, where the cluster keeps the sources (the
control plane): ``astra status``'s count and the console's Sources page no longer hold it, and
the next plan creates it afresh, as a run this source never applied. Where the sources' state is
kept elsewhere (``--state``), or the source's entry cannot be written now, the inventory forgets
it at the source's next apply, as it does any run deleted by hand.

Must not touch: the clusters' insides; of the sources' state, only the deleted run's entry.
"""

from __future__ import annotations

from typing import Annotated

import typer

from .day2 import failing, open_cluster
from .options import ServerOpt, TokenOpt
from .output import echo

__all__ = ["delete"]


def delete(
    names: Annotated[list[str], typer.Argument(help="The runs to delete.", show_default=False)],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking.")] = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Cancel runs (their workers are stopped now) and delete them.

    A run a source applied comes back at the source's next apply or watch pass, unless its file
    goes too: the command says which source and file.

    Examples:

        astra delete sweep-rerun-1

        astra delete train eval --yes
    """
    from .runviews import CommandFailed, run_annotations, workers_short

    with failing():
        cluster = open_cluster(server, token)
        found = [cluster.get_run(n) for n in dict.fromkeys(names)]
        missing = [n for n, r in zip(dict.fromkeys(names), found, strict=True) if r is None]
        if missing:
            raise CommandFailed(f"no run {', '.join(missing)} on {cluster.address}: nothing was deleted")
        runs = [r for r in found if r is not None]
        for r in runs:
            echo(f"- {r.name}  {r.state}, workers {workers_short(r)} running")
            notes = run_annotations(r)
            if "astra.source" in notes:
                where = f" from {notes['astra.file']}" if "astra.file" in notes else ""
                echo(
                    f"  applied by source {notes['astra.source']}{where}: the next 'astra apply' or watch "
                    f"pass of that source creates it again, unless {notes.get('astra.file', 'its file')} "
                    "goes too"
                )
        if not yes and not _confirm(len(runs), cluster.address):
            raise typer.Exit(1)
        for r in runs:
            cluster.delete_run(r.name)
            echo(f"{r.name}: deleted")
            _forget(cluster, r.name, run_annotations(r).get("astra.source"))


def _forget(cluster: object, run: str, source: str | None) -> None:
    """Remove ``run`` from ``source``'s inventory where the cluster keeps it (see the module)."""
    import logging
    import time

    from ..clusters.base import ClusterError
    from ..state import KeepsSources, StateError
    from ..state.naming import owner

    if source is None or not isinstance(cluster, KeepsSources):
        return
    store = cluster.source_store()
    if store is None:
        return
    try:  # under the source's apply lock, as every write of its inventory (the server demands it)
        lock = store.lock(source, owner(), time.time())
        try:
            store.record(source, run, None)
        finally:
            store.unlock(source, lock.id)
    except (StateError, ClusterError) as exc:  # an apply or watch holds the lock: its next pass forgets it
        logging.getLogger(__name__).debug("the inventory of %s keeps %s: %s", source, run, exc)


def _confirm(count: int, address: str) -> bool:
    """Whether the user types 'yes' (said why not, when not)."""
    from .confirming import confirmed

    what = "this run" if count == 1 else f"these {count} runs"
    return confirmed(
        f"Delete {what} from {address}?",
        no_terminal="no terminal to ask on: give --yes to delete without asking",
        declined="nothing was deleted: the answer was not 'yes'",
    )
