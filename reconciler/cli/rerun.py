"""``astra rerun RUN [--failed]``: a finished run runs again (the cluster's ``rerun`` operation:
the control plane's ``POST /runs/{name}/rerun``, or Slurm's).

Whole: the same run, under its name. ``--failed`` (an array): a new array ``<run>-rerun-<k>`` of
only the copies that did not complete, each seeing its original index and the original size
(``reconciler.runspec.rerun``); ``astra describe run`` links the two.

It asks first, as ``astra apply`` and ``astra delete`` do (a rerun costs GPUs): it says what it
will create and how many GPUs, and only ``yes`` goes on (``--yes`` skips the question; without a
terminal to ask on, ``--yes`` is needed). A run that cannot run again (not finished, ``--failed``
of a run that is no array, every copy completed) is not asked about: the cluster says why not.

Must not touch: the rules (the cluster's), the clusters' insides.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from .day2 import failing, open_cluster
from .options import ServerOpt, TokenOpt
from .output import echo

__all__ = ["rerun"]


def rerun(
    name: Annotated[str, typer.Argument(help="The finished run.")],
    failed: Annotated[
        bool,
        typer.Option("--failed", help="An array: only the copies that did not complete, in a new array."),
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Rerun without asking.")] = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Run a finished run again: whole, or (--failed, an array) only its copies that did not
    complete, in a new array <run>-rerun-<k> whose copies see their original indices in
    ASTRAEUS_ARRAY_TASK_ID, RANK and ASTRAEUS_REPLICA_INDEX (ASTRAEUS_ARRAY_SIZE stays the
    original size).

    Examples:

        astra rerun train

        astra rerun sweep --failed --yes

    Shows what it will create and how many GPUs, and asks (type 'yes'), unless --yes; with no
    terminal to ask on it refuses without --yes.
    """
    from ..runspec.rerun import RERUN_INDICES
    from .runviews import CommandFailed, run_annotations

    with failing():
        cluster = open_cluster(server, token, start=True)
        again = getattr(cluster, "rerun", None)
        if not callable(again):
            raise CommandFailed(f"{cluster.address} cannot rerun a run: delete it and apply it again")
        shown = _what_it_makes(cluster, name, failed)
        if shown is not None:
            echo(shown)
            if not yes and not _confirm(cluster.address):
                raise typer.Exit(1)
        run = again(name, failed=failed)
        if run.name == name:
            echo(f"{name}: runs again (whole)")
            return
        indices = run_annotations(run).get(RERUN_INDICES, "")
        count = len(indices.split(",")) if indices else 0
        echo(f"{run.name}: reruns {count} failed {'copy' if count == 1 else 'copies'} of {name} ({indices})")
        echo(f"Follow it: astra get runs {run.name} --watch")


def _what_it_makes(cluster: Any, name: str, failed: bool) -> str | None:
    """What the rerun of ``name`` will create, with its GPUs, in one line; ``None`` when the
    cluster will refuse it (it says why)."""
    from ..plan.cost import describe_ask
    from ..runspec.rerun import next_rerun_name, rerun_document
    from .runviews import CommandFailed

    run = cluster.get_run(name)
    if run is None:
        raise CommandFailed(f"no run {name} on {cluster.address}: nothing was rerun")
    if not run.final:
        return None
    if not failed:
        gpus = describe_ask(run.document) or "no GPU"
        return f"+ {name}  runs again whole ({run.state} now): {gpus}"
    if not (run.document.get("spec") or {}).get("array"):
        return None
    left = sorted(w.rank for w in cluster.workers(name) if w.state != "Completed")
    if not left:
        return None
    new = next_rerun_name(name, [r.name for r in cluster.list_runs()])
    gpus = describe_ask(rerun_document(run.document, new, left)) or "no GPU"
    copies = "copy" if len(left) == 1 else "copies"
    return f"+ {new}  a new array of the {len(left)} {copies} of {name} that did not complete: {gpus}"


def _confirm(address: str) -> bool:
    from .confirming import confirmed

    return confirmed(
        f"Rerun it on {address}?",
        no_terminal="no terminal to ask on: give --yes to rerun without asking",
        declined="nothing was rerun: the answer was not 'yes'",
    )
