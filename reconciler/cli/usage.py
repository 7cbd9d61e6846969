"""``astra usage``: GPU-hours held, those of runs that ended Failed (wasted), and runs, per group.

Thin: options in, ``GET /usage`` of the cluster (``remote.call``: ``--server``/``ASTRA_SERVER``,
else the local control plane) or, with ``--server slurm://``, Slurm's accounting
(``clusters.slurm.accounting``: sacct, or words on how to turn it on); a table, JSON or CSV out.

``register(app)`` adds the command to the ``astra`` application (``cli.app``).
Must not touch: how the figures are added up (the server's, or sacct's).
"""

from __future__ import annotations

import csv
import io
import os
from enum import StrEnum
from typing import Annotated, Any
from urllib.parse import urlencode

import typer

from .options import ServerOpt, TokenOpt
from .output import echo, error
from .planning import Exit

__all__ = ["register", "usage"]


class UsageFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


#: The columns of the table and the CSV, and the answer's keys they show.
COLUMNS = (
    ("WORKSPACE", "workspace"),
    ("GPU-HOURS", "gpu_hours"),
    ("WASTED-GPU-HOURS", "wasted_gpu_hours"),
    ("RUNS", "runs"),
    ("GPU-SECONDS", "gpu_seconds"),
)


def usage(
    by: Annotated[str, typer.Option("--by", help="workspace, label:KEY, run or source.")] = "workspace",
    since: Annotated[
        str | None, typer.Option("--since", help="A duration back from now: 30d, 12h, 2w.")
    ] = None,
    month: Annotated[str | None, typer.Option("--month", help="A calendar month (UTC): 2026-11.")] = None,
    output: Annotated[
        UsageFormat, typer.Option("--output", "-o", help="table, json or csv.")
    ] = UsageFormat.table,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """GPU-hours held per workspace (or label, run, source) over a period, with those of runs
    that ended Failed (wasted). Exact to the second: each worker's hold of GPUs, from its
    placement to its release, on the control plane's clock.

    Example:

        astra usage --by label:team --month 2026-11 -o csv
    """
    url = server or os.environ.get("ASTRA_SERVER") or ""
    report = _slurm(by, since, month) if url.startswith("slurm://") else _api(by, since, month, server, token)
    _print(report, output)


def _api(
    by: str, since: str | None, month: str | None, server: str | None, token: str | None
) -> dict[str, Any]:
    from ..runspec.periods import PeriodError, parse_group, period_of
    from .remote import CommandError, call

    try:  # the server says the same in the API's words: these are the command's
        parse_group(by)
        period_of(since, month, 0.0)
    except PeriodError as exc:
        error(str(exc))
        raise Exit(1) from exc
    query = {"by": by, **({"since": since} if since else {}), **({"month": month} if month else {})}
    try:
        return call("GET", "/usage?" + urlencode(query), server=server, token=token, start=False).json()
    except CommandError as exc:
        error(str(exc))
        raise Exit(1) from exc


def _slurm(by: str, since: str | None, month: str | None) -> dict[str, Any]:
    import time

    from ..clusters.slurm.accounting import AccountingOff, read_usage
    from ..runspec.periods import PeriodError, period_of

    if by not in ("workspace", "run", "user"):
        error(f"--by {by}: on Slurm, workspace (the job's account), run (its name) or user")
        raise Exit(1)
    try:
        period = period_of(since, month, time.time())
        items = read_usage(by, period.start, period.end)
    except (PeriodError, AccountingOff) as exc:
        error(str(exc))
        raise Exit(1) from exc
    return {"by": by, "cluster": "slurm", "period": period.to_json(), "items": items}


def _print(report: dict[str, Any], output: UsageFormat) -> None:
    items = report["items"]
    key = report["by"].upper().replace("LABEL:", "LABEL ")
    columns = list(COLUMNS) if report["by"] == "workspace" else [COLUMNS[0], (key, "key"), *COLUMNS[1:]]
    if output is UsageFormat.json:
        from .output import print_json

        print_json(report)
        return
    rows = [[str(i[k]) for _, k in columns] for i in items]
    if output is UsageFormat.csv:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([c.lower() for c, _ in columns])
        writer.writerows(rows)
        echo(out.getvalue().rstrip("\n"))
        return
    echo(f"GPU-hours on cluster {report['cluster']}, {report['period']['label']}")
    if not rows:
        echo("no GPU was held in this period")
        return
    table = [[c for c, _ in columns], *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(columns))]
    for r in table:
        echo("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def register(app: typer.Typer) -> None:
    """Add ``astra usage`` to the ``astra`` application."""
    app.command("usage")(usage)
