"""``astra get runs [NAME...]`` and ``astra get workers RUN``: what is on the cluster, as a table.

``get workers`` is ``astra astraeus workers`` itself (the seeds' table), registered under a
second name: one command, not two copies.

Without typer: the commands' bodies take their options (``flags.GetRunsOptions``,
``flags.WorkersOptions``) and are run by the plain argv route (``cli/__init__.py``) or by
typer's commands made of the same options (``day2_commands``, ``astraeus``).

Must not touch: the rows' content (``runviews``), the clusters' insides.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from .day2 import failing, open_cluster
from .output import echo

if TYPE_CHECKING:
    from .flags import GetRunsOptions, WorkersOptions

__all__ = ["render_runs", "runs_command", "select_runs", "worker_items", "worker_table", "workers_command"]

#: ``astra get``'s help.
GET_HELP = "List runs, or a run's workers."
#: How long ``--watch`` waits between two looks at the cluster.
WATCH_EVERY = 2.0


def runs_command(options: GetRunsOptions) -> int:
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
    from .runviews import parse_selector, run_record

    names, output, states = list(options.names), options.output, list(options.states)
    with failing(), _collecting(options.watch):
        wanted = parse_selector(list(options.selector))
        cluster = open_cluster(options.server, options.token)
        shown: list[dict[str, Any]] | None = None
        while True:
            chosen = select_runs(cluster, names, wanted, states)
            # the records: what -o json|yaml prints, and what --watch compares (a table printed
            # once needs none: 10,000 runs' records cost a third of its time)
            listed = options.watch or output in ("json", "yaml")
            seen = [run_record(r) for r in chosen] if listed else None
            if shown is None or seen != shown:  # a change of the runs, not of their ages
                if shown is not None:
                    echo()
                if output in ("json", "yaml"):
                    from .listing import print_listing

                    print_listing(seen or [], output)
                else:
                    filtered = bool(wanted or states)
                    lines = render_runs(chosen, output, day2.clock(), cluster.address, filtered)
                    echo("\n".join(lines))  # one write: 10,000 rows cost 10,000 writes
                shown = seen
            if not options.watch:
                return 0
            try:
                day2.sleep(WATCH_EVERY)
            except KeyboardInterrupt:
                return 0


def _collecting(watching: bool) -> AbstractContextManager[Any]:
    """The cyclic collector running again for a ``--watch``, which may last hours (``astra
    get`` runs with it paused: ``cli._PAUSED``); nothing for a listing printed once."""
    if not watching:
        return nullcontext()
    from ..collector import resumed

    return resumed()


def select_runs(
    cluster: Any, names: list[str], selector: dict[str, str], states: list[str]
) -> list[dict[str, Any]]:
    """The runs ``astra get runs`` shows, as their briefs (``runviews.brief``): those named (each
    must exist), else all (``GET /runs?view=brief`` where the cluster lists briefs), filtered."""
    from .runviews import CommandFailed, brief, matches

    if names:
        found = [cluster.get_run(n) for n in names]
        missing = [n for n, r in zip(names, found, strict=True) if r is None]
        if missing:
            raise CommandFailed(f"no run {', '.join(missing)} on {cluster.address}")
        listed = [brief(r) for r in found if r is not None]
    else:
        listed = sorted(_briefs(cluster), key=lambda b: b["name"])
    if not selector and not states:
        return listed
    return [b for b in listed if matches(b, selector, states)]


def _briefs(cluster: Any) -> list[dict[str, Any]]:
    """Every run's brief: listed so by the cluster when it can, else made of its whole runs."""
    from .runviews import brief

    reader = getattr(cluster, "list_run_briefs", None)
    found = reader() if callable(reader) else None
    return [brief(r) for r in cluster.list_runs()] if found is None else found


def render_runs(chosen: list[Any], output: str, now: float, address: str, filtered: bool) -> list[str]:
    """The lines of ``astra get runs``'s table (``output``: table or wide) of the runs' briefs."""
    from .runviews import RUN_COLUMNS, WIDE_COLUMNS, layout, run_row

    if not chosen:
        return [f"No runs on {address}" + (" match" if filtered else "") + "."]
    from .colour import enabled, paint_state

    wide = output == "wide"
    columns = WIDE_COLUMNS if wide else RUN_COLUMNS
    rows = [run_row(r, now, wide=wide) for r in chosen]
    if any(
        r.get("schedule") for r in chosen
    ):  # a run on a schedule: SCHEDULE NEXT (else the table is as it was)
        from .scheduleviews import SCHEDULE_COLUMNS, schedule_cells

        columns = (*columns, *SCHEDULE_COLUMNS)
        rows = [row + schedule_cells(r.get("schedule"), now) for row, r in zip(rows, chosen, strict=True)]
    lines = layout(columns, rows)
    if not enabled():
        return lines
    start = lines[0].index("STATE")  # the column's place; its width runs to the next column's
    width = lines[0].index("REASON") - start
    return [lines[0]] + [
        line[:start] + paint_state(row[1], width, True) + line[start + width :]
        for line, row in zip(lines[1:], rows, strict=True)
    ]


def workers_command(options: WorkersOptions) -> int:
    """List a run's workers: WORKER RANK STATE MACHINE REASON, and how many run.

    Works on any cluster: the local control plane, an Astraeus API (--server http://…) or a
    Slurm cluster (--server slurm://).
    """
    from ..runspec import messages as msg
    from .connect import connect
    from .listing import print_listing

    with failing():
        cluster = connect(options.server, options.token, start=False)
        items = worker_items(cluster, options.run)
        run = None if items or options.output != "table" else _the_run_if_it_answers(cluster, options.run)
    if options.output != "table":
        print_listing(items, options.output)
        return 0
    lines = worker_table(items)
    if run is not None:  # no worker: what the run went through, not "Workers 0 running of 0"
        from .runviews import no_workers

        lines.append(no_workers(run.state))
    else:
        running = sum(1 for w in items if w["state"] == "Running")
        lines.append(msg.WORKERS_READOUT.format(running=running, total=len(items)))
    echo("\n".join(lines))  # one write: 10,000 rows cost 10,000 writes
    return 0


def worker_items(cluster: Any, run: str) -> list[dict[str, Any]]:
    """The run's workers, each as its ``WorkerInfo``'s fields (``dataclasses.asdict`` gives them):
    so listed by the cluster when it can (``HttpCluster.worker_items``), else copied from its
    ``workers`` (they are scalars: no deep copy, which cost 10,000 workers a tenth of the
    command)."""
    reader = getattr(cluster, "worker_items", None)
    if callable(reader):
        return reader(run)
    from dataclasses import fields

    found = cluster.workers(run)
    names = [f.name for f in fields(found[0])] if found else []
    return [{name: getattr(w, name) for name in names} for w in found]


def _the_run_if_it_answers(cluster: Any, name: str) -> Any:
    """The run, to say what a run with no worker went through; ``None`` (the seeds' readout, as
    before) when the cluster does not answer with one."""
    from ..clusters.base import ClusterError

    try:
        return cluster.get_run(name)
    except ClusterError:
        return None


def worker_table(items: list[dict]) -> list[str]:
    """The seeds' table: columns at least as wide as theirs, wider for long values."""
    rows = [
        (w["name"], str(w["rank"]), w["state"], w.get("machine") or "-", w.get("reason") or "") for w in items
    ]
    least = (30, 7, 12, 22)
    widths = [max(w, max((len(row[i]) for row in rows), default=0) + 2) for i, w in enumerate(least)]
    line = "".join(f"{{:<{w}}}" for w in widths).format  # str.ljust's padding, one call a row
    return [line(*row[:4]) + row[4] for row in [("WORKER", "RANK", "STATE", "MACHINE", "REASON"), *rows]]
