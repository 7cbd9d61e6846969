"""Benchmark of the first apply: ``astra apply -f DIR --yes`` of N specs into an empty ``astra server``,
and the same apply killed part-way and run again.

``main(folders, astra, resume_n)``: for each size, the folder of that many generated specs (the
bench's ladder: 1,000 and 10,000, and 100,000 with ``--big``, each generated in a temporary
folder, never committed) is applied, as one cold process, to a server of its own
(``bench.served``: SQLite, loopback, machines that could hold each generated run, since apply's
review refuses a run no machine could hold, and a quota of no run for the workspace, so that every
run waits and no process is started: the server makes every worker, each array copy too),
and timed from the command's start to its end: loading, planning, the lock, every run created
and recorded, the history. The server must hold every run afterwards.

**Resumed** (``resume_n`` specs, 10,000 by default): the apply is started against another empty
server and killed with SIGKILL (its whole process group, as a CI job's timeout does) once the
server holds at least half of the runs (``GET /runs?view=summary``, asked every ``POLL`` s). It
is then run again: the lock the killed apply left is refused with words that name it, so, as
those words say, ``astra force-unlock ID`` clears it and the apply runs once more, to its end
with no error. The server must then hold exactly the specs' runs, each once. Reported: the
killed apply's time, the resume's (the refused apply, the unlock and the apply that finished,
each a cold process), and their sum, held to the first apply's target.

Target (issue 19, ``bench.targets``): 10,000 runs in at most 5 s, 2,000 runs/s, and linear beyond
(the same rate at 100,000). Run it once or twice, not in a loop: it is minutes.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import served, targets
from .measure import grid

__all__ = ["main"]

#: seconds between two looks at how many runs the server holds, while the apply to be killed runs
POLL = 0.1
KILL_TIMEOUT = 600.0


def main(folders: dict[int, tuple[Path, list[Path]]], astra: str, resume_n: int | None) -> dict[str, Any]:
    """Each size's first apply: its wall time, runs/s and verdict; the growth per run; the resume
    (of the folder of ``resume_n`` specs)."""
    py = sys.executable
    work = Path(tempfile.mkdtemp(prefix="astra-bench-apply-"))
    rows: list[dict[str, Any]] = []
    out: dict[str, Any] = {"target_runs_per_s": targets.APPLY_RUNS_PER_S}
    try:
        for n, (folder, files) in sorted(folders.items()):
            rows.append(_one(work / f"n{n}", folder, files, py, astra))
            print(_row_text(rows[-1]), flush=True)
        if resume_n:
            folder, files = folders[resume_n]
            out["resumed"] = _resumed(work / f"resumed-{resume_n}", folder, files, py, astra)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out["growth"] = [
        {"from": a["n"], "to": b["n"], "per_run": round((b["wall_s"] / b["n"]) / (a["wall_s"] / a["n"]), 2)}
        for a, b in itertools.pairwise(rows)
    ]
    out["sizes"] = rows
    out["figures"] = {r["n"]: {"first apply s": r["wall_s"]} for r in rows}
    if resume_n and out["resumed"]["killed"]:  # else it did not resume anything: no figure
        out["figures"].setdefault(resume_n, {})["resumed apply s"] = out["resumed"]["total_s"]
    print(_table(rows, out["growth"], out.get("resumed")))
    return out


def _server(work: Path, py: str) -> tuple[Any, str]:
    """An empty server that holds every generated run waiting (``served.HOLDING``, ``hold_all``)."""
    server, url = served.start_server(work, py, served.HOLDING)
    served.hold_all(url)
    return server, url


def _one(work: Path, folder: Path, files: list[Path], py: str, astra: str) -> dict[str, Any]:
    """One first apply of ``files`` into a new, empty server."""
    n = len(files)
    server, url = _server(work / "server", py)
    try:
        (work / "client").mkdir()
        env = served.client_env(work / "client")
        argv = [astra, "apply", "-f", str(folder), "--yes", "--server", url, "--token", served.TOKEN]
        run = served.run_in(env, [*argv, "--source", served.SOURCE])
        served.check(run, "astra apply -f DIR --yes")
        held = served.count_runs(url)
        if held != n:
            raise SystemExit(f"bench apply: the server holds {held} runs after the apply, not {n}")
    finally:
        served.stop(server, signal.SIGTERM, 60)
    rate = n / run.wall
    return {
        "n": n,
        "wall_s": round(run.wall, 2),
        "runs_per_s": round(rate, 1),
        "peak_rss_mib": round(run.rss_kib / 1024, 1),
        "target": f">= {targets.APPLY_RUNS_PER_S:,.0f} runs/s",
        "verdict": "PASS" if rate >= targets.APPLY_RUNS_PER_S else "MISS",
    }


def _resumed(work: Path, folder: Path, files: list[Path], py: str, astra: str) -> dict[str, Any]:
    """The apply killed once half of the runs exist, then run again to its end (see the docstring)."""
    n = len(files)
    names = sorted(m.group(1) for f in files if (m := re.search(r"^  name: (\S+)$", f.read_text(), re.M)))
    server, url = _server(work / "server", py)
    try:
        (work / "client").mkdir()
        env = served.client_env(work / "client")
        conn = ["--server", url, "--token", served.TOKEN, "--source", served.SOURCE]
        argv = [astra, "apply", "-f", str(folder), "--yes", *conn]
        start = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            held = 0
            while proc.poll() is None and held < n // 2:
                if time.perf_counter() - start > KILL_TIMEOUT:
                    raise SystemExit(f"bench apply: {n // 2} runs not made within {KILL_TIMEOUT:g} s")
                time.sleep(POLL)
                held = len(served.run_names(url, summary=True))
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        killed_s = time.perf_counter() - start
        killed = proc.returncode == -signal.SIGKILL
        at_kill = len(served.run_names(url, summary=True))
        steps = []
        run = served.run_in(env, argv)
        steps.append(("astra apply (refused: the killed apply's lock)", run.wall))
        if run.code != 0:
            said = run.stdout + run.stderr
            lock = re.search(r"astra force-unlock (\S+)", said)
            if "that apply is gone" not in said or lock is None:
                raise SystemExit(f"bench apply: the resumed apply exited {run.code}:\n{said[-2000:]}")
            unlock = served.run_in(env, [astra, "force-unlock", lock.group(1), *conn])
            served.check(unlock, "astra force-unlock ID")
            steps.append(("astra force-unlock ID", unlock.wall))
            run = served.run_in(env, argv)
            served.check(run, "astra apply -f DIR --yes (resumed)")
            steps.append(("astra apply (resumed, to its end)", run.wall))
        else:
            steps[0] = ("astra apply (resumed, to its end)", run.wall)
        held_names = served.run_names(url)
    finally:
        served.stop(server, signal.SIGTERM, 60)
    if len(held_names) != n or sorted(held_names) != names:
        twice = len(held_names) - len(set(held_names))
        raise SystemExit(
            f"bench apply: after the resumed apply the server holds {len(held_names)} runs "
            f"({twice} held twice), not the {n} of the specs"
        )
    resumed_s = sum(wall for _, wall in steps)
    total = killed_s + resumed_s
    return {
        "n": n,
        "killed": killed,
        "held_at_kill": at_kill,
        "killed_s": round(killed_s, 2),
        "steps": [{"what": what, "wall_s": round(wall, 2)} for what, wall in steps],
        "resumed_s": round(resumed_s, 2),
        "total_s": round(total, 2),
        "server_holds": len(held_names),
        "target": f"<= {n / targets.APPLY_RUNS_PER_S:g} s",
        "verdict": ("PASS" if n / total >= targets.APPLY_RUNS_PER_S else "MISS") if killed else "not killed",
    }


def _row_text(r: dict[str, Any]) -> str:
    return (
        f"first apply of {r['n']:,} runs: {r['wall_s']:.2f} s, {r['runs_per_s']:,.0f} runs/s ({r['verdict']})"
    )


def _table(rows: list[dict[str, Any]], growth: list[dict[str, Any]], resumed: dict[str, Any] | None) -> str:
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
    if resumed:
        r = resumed
        how = (
            f"killed (SIGKILL) after {r['killed_s']:.2f} s with {r['held_at_kill']:,} runs made"
            if r["killed"]
            else f"NOT killed: it ended first, after {r['killed_s']:.2f} s"
        )
        if r["killed"] and r["held_at_kill"] == r["n"]:
            how += " (all of them: it was killed after its last batch, before its end)"
        steps = ", ".join(f"{s['what']} {s['wall_s']:.2f} s" for s in r["steps"])
        out += (
            f"\n\nresumed apply of {r['n']:,} runs: {how}; then {steps}; the server holds "
            f"{r['server_holds']:,} runs, each once\n  killed {r['killed_s']:.2f} s + resumed "
            f"{r['resumed_s']:.2f} s = {r['total_s']:.2f} s (target {r['target']}): {r['verdict']}"
        )
    return out
