"""``astra rerun RUN [--failed]``: a finished run runs again (the cluster's ``rerun`` operation:
the control plane's ``POST /runs/{name}/rerun``, or Slurm's).

Whole: the same run, under its name. ``--failed`` (an array): a new array ``<run>-rerun-<k>`` of
only the copies that did not complete, each seeing its original index and the original size
(``reconciler.runspec.rerun``); ``astra describe run`` links the two.

Must not touch: the rules (the cluster's), the clusters' insides.
"""

from __future__ import annotations

from typing import Annotated

import typer

from .day2 import ServerOpt, TokenOpt, failing, open_cluster
from .output import echo

__all__ = ["rerun"]


def rerun(
    name: Annotated[str, typer.Argument(help="The finished run.")],
    failed: Annotated[
        bool,
        typer.Option("--failed", help="An array: only the copies that did not complete, in a new array."),
    ] = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Run a finished run again: whole, or (--failed, an array) only its copies that did not
    complete, in a new array <run>-rerun-<k> whose copies see their original indices in
    ASTRAEUS_ARRAY_TASK_ID, RANK and ASTRAEUS_REPLICA_INDEX (ASTRAEUS_ARRAY_SIZE stays the
    original size).

    Examples:

        astra rerun train

        astra rerun sweep --failed
    """
    from ..runspec.rerun import RERUN_INDICES
    from .runviews import CommandFailed, run_annotations

    with failing():
        cluster = open_cluster(server, token, start=True)
        again = getattr(cluster, "rerun", None)
        if not callable(again):
            raise CommandFailed(f"{cluster.address} cannot rerun a run: delete it and apply it again")
        run = again(name, failed=failed)
        if run.name == name:
            echo(f"{name}: runs again (whole)")
            return
        indices = run_annotations(run).get(RERUN_INDICES, "")
        count = len(indices.split(",")) if indices else 0
        echo(f"{run.name}: reruns {count} failed {'copy' if count == 1 else 'copies'} of {name} ({indices})")
        echo(f"Follow it: astra get runs {run.name} --watch")
