"""``astra schedule suspend|resume NAME``: a run on a schedule stops making runs, and starts again
(the control plane's ``PUT``/``DELETE /runs/{name}/schedule/suspend``); and how a schedule reads
in ``astra get runs`` (``SCHEDULE NEXT``) and ``astra describe run``.

Suspended, a schedule makes no run (the runs it made go on); resumed, a time missed while it was
suspended starts once, the latest (Kubernetes CronJob without ``startingDeadlineSeconds``). The
suspension is the server's, as ``astra source suspend``'s: a GitOps pass of the file does not
undo it. Must not touch: the clusters' insides, the rules (the server's).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Annotated

import typer

from .day2 import ServerOpt, TokenOpt, failing, open_cluster
from .output import echo

if TYPE_CHECKING:
    from ..runs import LiveRun

__all__ = ["SCHEDULE_COLUMNS", "schedule_app", "schedule_cells", "schedule_lines"]

schedule_app = typer.Typer(
    name="schedule",
    help="Suspend or resume a run on a schedule (spec.schedule).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)

#: The columns ``astra get runs`` adds when a run it lists is on a schedule.
SCHEDULE_COLUMNS = ("SCHEDULE", "NEXT")


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
    echo(f"schedule of {name} resumed: next run {_at(when)}")


def _at(when: float | None) -> str:
    if when is None:
        return "-"
    return dt.datetime.fromtimestamp(when, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _in(when: float, now: float) -> str:
    from .runviews import age

    return "now" if when <= now else f"in {age(now, when)}"


def schedule_cells(run: LiveRun, now: float) -> tuple[str, str]:
    """``SCHEDULE NEXT`` of ``astra get runs``: ``0 2 * * * Europe/Paris``, ``in 9h`` (``-`` for
    a run with no schedule; ``suspended``)."""
    s = run.schedule
    if not s:
        return ("-", "-")
    nxt = s.get("next_at")
    shown = "suspended" if s.get("suspended") else "-" if nxt is None else _in(nxt, now)
    return (f"{s.get('cron')} {s.get('timezone')}", shown)


def schedule_lines(run: LiveRun, now: float) -> list[str]:
    """What ``astra describe run`` says of a run on a schedule (a run it made says so in its
    ``Source:`` line)."""
    s = run.schedule
    if not s:
        return []
    nxt = s.get("next_at")
    if s.get("suspended"):
        when = f"suspended by {s.get('suspended_by') or '?'} at {_at(s.get('suspended_at'))}"
    else:
        when = "-" if nxt is None else f"{_at(nxt)} ({_in(nxt, now)})"
    active = ", ".join(s.get("active") or []) or "-"
    return [
        f"Schedule:  {s.get('cron')} ({s.get('timezone')}), concurrency {s.get('concurrency')}, "
        f"keeps {s.get('keep')} finished",
        f"Next run:  {when}",
        f"Last made: {_at(s.get('last_schedule_at'))}; last completed: {_at(s.get('last_successful_at'))}",
        f"Active:    {active}",
    ]
