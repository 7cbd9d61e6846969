"""Benchmark of the first apply: ``astra apply -f DIR --yes`` of N specs into an empty ``astra server``.

``main(folder, sizes)``: for each size, the first ``size`` specs of ``folder`` (more are generated
in a temporary folder when ``folder`` holds fewer: ``--big`` asks for 100,000, never committed)
are applied, as one cold process, to a server of its own (SQLite, loopback, started by
``bench.plan``: an inventory of 16 machines of 8 GPUs, whose cores and memory hold none of the
generated runs, so the scheduler fails each at its first look and no process is started), and
timed from the command's start to its end: loading, planning, the lock, every run created and
recorded, the history. The server must hold every run afterwards.

Target (issue 19): 10,000 runs in at most 5 s, 2,000 runs/s, and linear beyond (the growth from
one size to the next, per run, is printed). Run it once or twice, not in a loop: it is minutes.
"""

from __future__ import annotations

import itertools
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from . import plan as served
from .measure import grid
from .specs import write_specs

__all__ = ["TARGET_RUNS_PER_S", "main"]

#: issue 19: 10,000 runs in at most 5 s
TARGET_RUNS_PER_S = 2000.0
MODELINE = "# yaml-language-server: $schema=../../schema/run.schema.json"


def main(folder: Path, files: list[Path], sizes: list[int], astra: str) -> dict[str, Any]:
    """Each size's first apply: its wall time, runs/s and verdict; then the growth per run."""
    py = sys.executable
    work = Path(tempfile.mkdtemp(prefix="astra-bench-apply-"))
    rows: list[dict[str, Any]] = []
    try:
        if len(files) < max(sizes):
            more = work / "specs"
            files = write_specs(more, max(sizes), modeline=MODELINE)
            folder = more
        for n in sizes:
            rows.append(_one(work / f"n{n}", folder, files[:n], py, astra))
            print(_row_text(rows[-1]), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    growth = [
        {"from": a["n"], "to": b["n"], "per_run": round((b["wall_s"] / b["n"]) / (a["wall_s"] / a["n"]), 2)}
        for a, b in itertools.pairwise(rows)
    ]
    print(_table(rows, growth))
    return {"target_runs_per_s": TARGET_RUNS_PER_S, "sizes": rows, "growth": growth}


def _one(work: Path, folder: Path, files: list[Path], py: str, astra: str) -> dict[str, Any]:
    """One first apply of ``files`` into a new, empty server."""
    n = len(files)
    subset = work / "specs"
    for f in files:
        target = subset / f.relative_to(folder)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, target)
    (work / "server").mkdir(parents=True)
    server, url = served._start_server(work / "server", py)
    try:
        (work / "client").mkdir()
        env = served._client_env(work / "client")
        argv = [astra, "apply", "-f", str(subset), "--yes", "--server", url, "--token", served.TOKEN]
        run = served._run(env, [*argv, "--source", served.SOURCE])
        served._check(run, "astra apply -f DIR --yes")
        held = served._count_runs(url)
        if held != n:
            raise SystemExit(f"bench apply: the server holds {held} runs after the apply, not {n}")
    finally:
        served._stop(server, signal.SIGTERM, 60)
    rate = n / run.wall
    return {
        "n": n,
        "wall_s": round(run.wall, 2),
        "runs_per_s": round(rate, 1),
        "peak_rss_mib": round(run.rss_kib / 1024, 1),
        "target": f">= {TARGET_RUNS_PER_S:,.0f} runs/s",
        "verdict": "PASS" if rate >= TARGET_RUNS_PER_S else "MISS",
    }


def _row_text(r: dict[str, Any]) -> str:
    return (
        f"first apply of {r['n']:,} runs: {r['wall_s']:.2f} s, {r['runs_per_s']:,.0f} runs/s ({r['verdict']})"
    )


def _table(rows: list[dict[str, Any]], growth: list[dict[str, Any]]) -> str:
    table = [("first astra apply, empty server", "wall s", "runs/s", "client RSS MiB", "target", "verdict")]
    for r in rows:
        table.append(
            (
                f"{r['n']:,} runs",
                f"{r['wall_s']:.2f}",
                f"{r['runs_per_s']:,.0f}",
                f"{r['peak_rss_mib']:.0f}",
                r["target"],
                r["verdict"],
            )
        )
    out = "\n" + grid(table, right=(1, 2, 3))
    for g in growth:
        out += f"\n  growth per run {g['from']:,} -> {g['to']:,}: x{g['per_run']:.2f} (linear: x1.00)"
    return out
