"""``astra schedule suspend|resume NAME``: a run on a schedule stops making runs, and starts again
(the control plane's ``PUT``/``DELETE /runs/{name}/schedule/suspend``). How a schedule reads in
``astra get runs`` and ``astra describe run`` is ``scheduleviews``' (no typer: the reads' plain
route prints it).

Suspended, a schedule makes no run (the runs it made go on); resumed, a time missed while it was
suspended starts once, the latest (Kubernetes CronJob without ``startingDeadlineSeconds``). The
suspension is the server's, as ``astra source suspend``'s: a GitOps pass of the file does not
undo it. Must not touch: the clusters' insides, the rules (the server's).
"""

from __future__ import annotations

from typing import Annotated

import typer

from .day2 import failing, open_cluster
from .options import ServerOpt, TokenOpt
from .output import echo
from .scheduleviews import at

__all__ = ["schedule_app"]

schedule_app = typer.Typer(
    name="schedule",
    help="Suspend or resume a run on a schedule (spec.schedule).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


def _suspend(name: str, suspended: bool, reason: str, server: str | None, token: str | None) -> dict:
    from .runviews import CommandFailed

    cluster = open_cluster(server, token)
    call = getattr(cluster, "suspend_schedule", None)
    if not callable(call):
        raise CommandFailed(
            f"{cluster.address} keeps no schedules: a run on a schedule needs astra's control plane"
        )
    return call(name, suspended, reason) if suspended else call(name, False)


@schedule_app.command("suspend")
def suspend(
    name: Annotated[str, typer.Argument(help="The run on a schedule.")],
    reason: Annotated[str, typer.Option("--reason", help="Why, in words (kept in its events).")] = "",
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Suspend a run's schedule: it makes no run until 'astra schedule resume NAME' (the runs it
    made go on).

    Example:

        astra schedule suspend nightly --reason "cluster maintenance"
    """
    with failing():
        _suspend(name, True, reason, server, token)
    echo(f"schedule of {name} suspended: no run is made until 'astra schedule resume {name}'")


@schedule_app.command("resume")
def resume(
    name: Annotated[str, typer.Argument(help="The run on a schedule.")],
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Resume a run's schedule: a time missed while it was suspended starts once (the latest),
    then one run at each time.

    Example:

        astra schedule resume nightly
    """
    with failing():
        said = _suspend(name, False, "", server, token)
    when = said.get("next_at") if isinstance(said, dict) else None
    echo(f"schedule of {name} resumed: next run {at(when)}")
