"""``astra get runs [NAME...]`` and ``astra get workers RUN``: what is on the cluster, as a table.

``get workers`` is ``astra astraeus workers`` itself (the seeds' table), registered under a
second name: one command, not two copies.

Must not touch: the rows' content (``runviews``), the clusters' insides.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from .astraeus import workers as astraeus_workers
from .day2 import ServerOpt, TokenOpt, failing, open_cluster
from .output import echo

__all__ = ["get_app", "render_runs", "select_runs"]

get_app = typer.Typer(
    name="get",
    help="List runs, or a run's workers.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


class RunsFormat(StrEnum):
    table = "table"
    wide = "wide"
    json = "json"
    yaml = "yaml"


#: How long ``--watch`` waits between two looks at the cluster.
WATCH_EVERY = 2.0


@get_app.command("runs")
def runs(
    names: Annotated[list[str] | None, typer.Argument(help="Only these runs (default: every run).")] = None,
    output: Annotated[
        RunsFormat, typer.Option("--output", "-o", help="table, wide (adds FILE REVISION), json or yaml.")
    ] = RunsFormat.table,
    selector: Annotated[
        list[str] | None, typer.Option("--selector", "-l", help="Only runs with these labels: key=value[,…].")
    ] = None,
    states: Annotated[
        list[str] | None, typer.Option("--state", help="Only runs in this state (repeatable).")
    ] = None,
    watch: Annotated[
        bool, typer.Option("--watch", "-w", help="Look again every 2 s and print the table when it changes.")
    ] = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """List runs: NAME STATE REASON WORKERS GPUS AGE SOURCE.

    WORKERS is the readout "Workers 8 running of 100" in short (8/100); SOURCE is the source
    that applied the run (astra plan/apply/watch), '-' for a run submitted by hand. When a run
    on a schedule is listed, SCHEDULE NEXT follow: its cron and timezone, and when it next makes
    a run ('suspended': astra schedule resume NAME).

    Examples:

        astra get runs

        astra get runs -l team=nlp --state Failed -o wide

        astra get runs sweep -o json
    """
    from . import day2
    from .listing import print_listing
    from .runviews import parse_selector, run_record

    with failing():
        wanted = parse_selector(selector or [])
        cluster = open_cluster(server, token)
        shown: list[dict[str, Any]] | None = None
        while True:
            chosen = select_runs(cluster, names or [], wanted, states or [])
            seen = [run_record(r) for r in chosen]
            if seen != shown:  # a change of the runs, not of their ages
                if shown is not None:
                    echo()
                if output.value in ("json", "yaml"):
                    print_listing(seen, output.value)
                else:
                    filtered = bool(wanted or states)
                    for line in render_runs(chosen, output.value, day2.clock(), cluster.address, filtered):
                        echo(line)
                shown = seen
            if not watch:
                return
            try:
                day2.sleep(WATCH_EVERY)
            except KeyboardInterrupt:
                return


def select_runs(cluster: Any, names: list[str], selector: dict[str, str], states: list[str]) -> list[Any]:
    """The runs ``astra get runs`` shows: those named (each must exist), else all, filtered."""
    from .runviews import CommandFailed, matches

    if names:
        found = [cluster.get_run(n) for n in names]
        missing = [n for n, r in zip(names, found, strict=True) if r is None]
        if missing:
            raise CommandFailed(f"no run {', '.join(missing)} on {cluster.address}")
        listed = [r for r in found if r is not None]
    else:
        listed = sorted(cluster.list_runs(), key=lambda r: r.name)
    return [r for r in listed if matches(r, selector, states)]


def render_runs(chosen: list[Any], output: str, now: float, address: str, filtered: bool) -> list[str]:
    """The lines of ``astra get runs``'s table (``output``: table or wide)."""
    from .runviews import RUN_COLUMNS, WIDE_COLUMNS, layout, run_row

    if not chosen:
        return [f"No runs on {address}" + (" match" if filtered else "") + "."]
    from .colour import enabled, paint_state

    wide = output == "wide"
    columns = WIDE_COLUMNS if wide else RUN_COLUMNS
    rows = [run_row(r, now, wide=wide) for r in chosen]
    if any(r.schedule for r in chosen):  # a run on a schedule: SCHEDULE NEXT (else the table is as it was)
        from .schedule import SCHEDULE_COLUMNS, schedule_cells

        columns = (*columns, *SCHEDULE_COLUMNS)
        rows = [row + schedule_cells(r, now) for row, r in zip(rows, chosen, strict=True)]
    lines = layout(columns, rows)
    if not enabled():
        return lines
    start = lines[0].index("STATE")  # the column's place; its width runs to the next column's
    width = lines[0].index("REASON") - start
    return [lines[0]] + [
        line[:start] + paint_state(r.state, width, True) + line[start + width :]
        for line, r in zip(lines[1:], chosen, strict=True)
    ]


get_app.command(
    "workers",
    help="A run's workers: WORKER RANK STATE MACHINE REASON, and how many run "
    "(the same command as 'astra astraeus workers').",
)(astraeus_workers)
