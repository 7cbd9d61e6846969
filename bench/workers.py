"""Benchmark of the control plane holding many workers: 10 arrays on a cluster too small to run them.

``main(sizes)`` (``python -m bench --only workers``, and with ``--only apply``; the sizes are the
bench's ladder: 1,000 and 10,000, and 100,000 with ``--big``): for each size N (workers: 10
arrays of N/10 copies of one GPU each),

* **served**: ``astra server`` (SQLite, loopback, started by ``bench.served`` with an inventory of
  one machine of 8 GPUs: 8 copies run ``sleep``, every other copy waits) is given the 10 arrays
  in one ``POST /runs:batch``; once every copy exists (each array's ``task_counts`` add up to
  its size), the server's resident memory is read from ``/proc`` (``VmRSS``, and its peak
  ``VmHWM``, the figure held to the target), then ``GET /runs?view=summary`` is asked
  ``ASKS`` times: its p50, client to server and back;
* **in process**, the ``Engine`` with a SQLite store, a simulated executor and a manual clock
  (time jumps to the next event, no process is started) on 16 machines of 8 GPUs: the same
  arrays (each array's copies run 50 to 95 s, so that their ends are spread), the step that
  admits them (every copy made and written), then ``STEPS`` steps, each at the next instant
  something happens (copies end, others take their GPUs): each step's wall time (a tick,
  settled, and its one transaction), p50 and p95;
* **waiting runs**, in the scheduler alone (``ClusterState``, ``plan_tick``, no store, the
  same 16 machines): N runs of one GPU each (an hour's limit), ``STEPS`` ticks with nothing to
  do (time passes, nothing ends), and, up to ``BUSY_MAX`` runs, ``STEPS`` instants as runs end
  and others start (each settled: every tick until nothing more happens). Each time the first
  run blocked for room changes, every run behind it gets a new reason (it names that run): the
  busy figure grows with the queue, one decision a waiting run.

``ticks(sizes)`` (``python -m bench --only ticks``; ``--n 100000`` for 10,000 and 100,000):
the in-process figures alone, without the server; ``--cpu-time`` times them in the process's
CPU time, to compare two versions of the scheduler on a machine others load.

Targets (issue 19, at 100,000 workers): server RSS at most 1 GiB, ``GET /runs?view=summary`` p50
at most 50 ms, a tick with 100,000 pending copies at most 200 ms (p50). The growth of each figure
from one size to the next (×10 workers) is printed against n log n (×10·log(10n)/log(n)).
The server is always stopped, whatever happens.
"""

from __future__ import annotations

import itertools
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import served, targets
from .measure import grid

__all__ = ["TARGETS", "main", "ticks"]

ARRAYS = 10
STEPS = 40
ASKS = 30
#: the busy ticks of waiting runs are measured up to this many runs (above, minutes)
BUSY_MAX = 10_000
TARGETS = targets.WORKERS
#: one machine of 8 GPUs: 8 copies run at once, the rest wait
SMALL = "machines:\n  - name: small-0\n    gpus: 8\n    cpu_cores: 64\n    memory_bytes: 256Gi\n"
ADMIT_TIMEOUT = 600.0


def _array(name: str, size: int, command: list[str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "array": {"size": size},
            "task_template": {
                "image": "busybox",
                "command": command[0],
                "args": command[1:],
                "time_limit_seconds": 86400,
                "requested_resources": {"cpu_cores": 1, "gpu_requests": {"count": 1}},
            },
        },
    }


def _arrays(n: int, command: list[str]) -> list[dict[str, Any]]:
    return [_array(f"sweep-{i}", n // ARRAYS, command) for i in range(ARRAYS)]


# ---- served: astra server holding the workers ----------------------------------------------------


def _status(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of process ``pid``, in KiB."""
    out = {}
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    return out


def serve(n: int, work: Path, py: str) -> dict[str, Any]:
    """Server RSS holding ``n`` workers, and GET /runs?view=summary p50 (ms)."""
    work.mkdir(parents=True)
    server, url = served.start_server(work, py, SMALL)
    try:
        with served.client(url) as c:
            start = time.perf_counter()
            made = c.post("/runs:batch", json={"runs": _arrays(n, ["sleep", "100000"])})
            if made.status_code != 200 or made.json()["created"] != ARRAYS:
                raise SystemExit(f"bench workers: the batch answered {made.status_code}: {made.text[:300]}")
            for i in range(ARRAYS):
                while sum((c.get(f"/runs/sweep-{i}").json().get("task_counts") or {}).values()) < n // ARRAYS:
                    if time.perf_counter() - start > ADMIT_TIMEOUT:
                        raise SystemExit(f"bench workers: {n} workers not made in {ADMIT_TIMEOUT:g} s")
                    time.sleep(0.2)
            made_s = time.perf_counter() - start
            mem = _status(server.pid)
            asks = []
            for _ in range(ASKS):
                t0 = time.perf_counter()
                got = c.get("/runs", params={"view": "summary"})
                asks.append(time.perf_counter() - t0)
                got.raise_for_status()
            if len(got.json()["items"]) != ARRAYS:
                raise SystemExit("bench workers: the summary does not list every array")
    finally:
        served.stop(server, signal.SIGTERM, 60)
    return {
        "made_s": round(made_s, 2),
        "rss_mib": round(mem["VmRSS"] / 1024, 1),
        "peak_rss_mib": round(mem["VmHWM"] / 1024, 1),
        "summary_ms": round(statistics.median(asks) * 1000, 2),
    }


# ---- in process: the engine's ticks ------------------------------------------------------------


def _cluster():
    from reconciler.controlplane.inventory import default_inventory

    return default_inventory(racks=2, machines_per_rack=8)  # 16 machines, 128 GPUs


def _pcts(walls: list[float]) -> dict[str, float]:
    ordered = sorted(walls)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000, 2),
    }


def engine_ticks(n: int, timer: Callable[[], float] = time.perf_counter) -> dict[str, Any]:
    """The engine with ``n`` copies in 10 arrays: the admitting step, then ``STEPS`` steps, timed
    by ``timer`` (wall time; ``time.process_time``: this process's CPU time)."""
    from reconciler.controlplane.clock import ManualClock
    from reconciler.controlplane.engine import Engine
    from reconciler.controlplane.scheduler import WorkerState
    from reconciler.controlplane.simulation import Outcome, SimulatedExecutor
    from reconciler.controlplane.store import Store

    with tempfile.TemporaryDirectory(prefix="astra-bench-ticks-") as folder:
        store = Store(f"sqlite:///{folder}/astra.db")
        clock = ManualClock(0.0)
        executor = SimulatedExecutor(Outcome(after=60.0))
        for i in range(ARRAYS):
            executor.run_defaults[f"sweep-{i}"] = Outcome(after=50.0 + 5 * i)
        engine = Engine(store, _cluster(), executor, clock.now())
        engine.submit_batch(_arrays(n, ["true"]), clock.now())
        t0 = timer()
        engine.step(clock.now())
        admit = timer() - t0
        walls, made = [], 0
        for _ in range(STEPS):
            now = clock.now()
            nxt = min(t for t in (engine.next_wakeup(now), executor.next_time(), now + 60) if t is not None)
            clock.set(max(nxt, now))
            t0 = timer()
            made += engine.step(clock.now())
            walls.append(timer() - t0)
        pending = sum(1 for w in engine.state.workers.values() if w.state is WorkerState.PENDING)
        store.close()
    return {"admit_s": round(admit, 2), **_pcts(walls), "decisions": made, "pending": pending}


def waiting_runs(n: int, busy: bool, timer: Callable[[], float] = time.perf_counter) -> dict[str, Any]:
    """The scheduler alone with ``n`` waiting runs of one GPU: the admitting tick, ``STEPS`` idle
    ticks (nothing changed: time passes), then (``busy``) ``STEPS`` instants as runs end and
    others start, each settled (every tick until nothing more happens); timed by ``timer``."""
    from reconciler.controlplane.scheduler import ClusterState, plan_tick
    from reconciler.controlplane.simulation import Outcome, SimulatedExecutor
    from reconciler.runspec.parse import parse_run

    state = ClusterState(_cluster())
    executor = SimulatedExecutor(Outcome(after=60.0))
    one = parse_run({"metadata": {"name": "run"}, "spec": {"task_template": _template()}})
    for i in range(n):
        meta = one.metadata.model_copy(update={"name": f"run-{i}"})
        state.submit(one.model_copy(update={"metadata": meta}), 1.0)
        executor.run_defaults[f"run-{i}"] = Outcome(after=50.0 + (i % 10) * 5)
    t0 = timer()
    _settle(state, executor, 1.0)
    admit = timer() - t0
    # a second later the runs queued cannot end before the first blocked one could start: they
    # wait behind it; then, until the first runs end (at 51), nothing changes
    _settle(state, executor, 2.0)
    idle = []
    for k in range(STEPS):
        t0 = timer()
        if plan_tick(state, 3.0 + k):
            raise SystemExit("bench workers: an idle tick decided something")
        idle.append(timer() - t0)
    out = {"admit_s": round(admit, 2), "idle": _pcts(idle)}
    waiting = sum(1 for r in state.runs.values() if r.state == "Pending")
    if busy:
        walls, made, now = [], [], 1.0
        for _ in range(STEPS):
            now = max(
                min(t for t in (state.next_wakeup(now), executor.next_time(), now + 60) if t is not None), now
            )
            t0 = timer()
            made.append(_settle(state, executor, now))
            walls.append(timer() - t0)
        out["busy"] = {**_pcts(walls), "decisions_p50": statistics.median(made)}
    return {**out, "waiting_runs": waiting}


def _template() -> dict[str, Any]:
    return {
        "image": "busybox",
        "command": "true",
        "time_limit_seconds": 3600,
        "requested_resources": {"cpu_cores": 1, "gpu_requests": {"count": 1}},
    }


def _settle(state: Any, executor: Any, now: float) -> int:
    """What ``Engine.step`` does at ``now``, without a store: ticks until nothing more happens;
    how many decisions were made."""
    from reconciler.controlplane.scheduler import plan_tick

    for o in executor.pop_due(now):
        state.observe(o, now)
    made = 0
    while True:
        decisions = plan_tick(state, now)
        made += len(decisions)
        if decisions:
            state.apply(decisions, now)
            for d in decisions:
                executor.handle(d, state, now)
        due = executor.pop_due(now)
        for o in due:
            state.observe(o, now)
        if not decisions and not due:
            return made


# ---- the report ----------------------------------------------------------------------------------


def main(sizes: list[int]) -> dict[str, Any]:
    """Each size's figures, then the growth from one size to the next, with the targets at 100k."""
    py = sys.executable
    work = Path(tempfile.mkdtemp(prefix="astra-bench-workers-"))
    rows: list[dict[str, Any]] = []
    try:
        for n in sizes:
            row: dict[str, Any] = {"n": n}
            row["served"] = serve(n, work / f"n{n}", py)
            row["engine"] = engine_ticks(n)
            row["runs"] = waiting_runs(n, busy=n <= BUSY_MAX)
            rows.append(row)
            print(_row_text(row), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    growth = [_growth(a, b) for a, b in itertools.pairwise(rows)]
    verdicts = _verdicts(rows[-1])
    print(_table(rows, growth, verdicts))
    figures = {r["n"]: _figures(r) for r in rows}
    return {"targets": TARGETS, "sizes": rows, "growth": growth, "verdicts": verdicts, "figures": figures}


def ticks(sizes: list[int], cpu: bool = False) -> dict[str, Any]:
    """The scheduler's ticks alone, in process, at each size (``python -m bench --only ticks``):
    the engine's ticks with the copies pending and the ticks over waiting runs, as ``main``
    measures them, without the server. ``cpu``: timed in this process's CPU time, which other
    processes on a loaded machine change less than the wall time (for comparing two versions)."""
    timer = time.process_time if cpu else time.perf_counter
    rows = []
    for n in sizes:
        row: dict[str, Any] = {
            "n": n,
            "engine": engine_ticks(n, timer),
            "runs": waiting_runs(n, n <= BUSY_MAX, timer),
        }
        busy = row["runs"].get("busy")
        print(
            f"  {n:>7,} workers: tick p50 (copies) {row['engine']['p50_ms']} ms (p95 "
            f"{row['engine']['p95_ms']}), idle tick p50 (runs) {row['runs']['idle']['p50_ms']} ms"
            + (f", busy tick p50 {busy['p50_ms']} ms" if busy else "")
            + (" [CPU time]" if cpu else ""),
            flush=True,
        )
        rows.append(row)
    return {"clock": "cpu" if cpu else "wall", "sizes": rows}


def _figures(row: dict[str, Any]) -> dict[str, float]:
    return {
        "server peak RSS": row["served"]["peak_rss_mib"],
        "summary p50": row["served"]["summary_ms"],
        "tick p50 (copies)": row["engine"]["p50_ms"],
        "idle tick p50 (runs)": row["runs"]["idle"]["p50_ms"],
    }


def _growth(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    fa, fb = _figures(a), _figures(b)
    bound = targets.nlogn_bound(a["n"], b["n"])
    ratios = {k: round(fb[k] / fa[k], 2) if fa[k] else None for k in fa}
    return {"from": a["n"], "to": b["n"], "n_log_n": round(bound, 1), "ratios": ratios}


def _verdicts(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The figures held to the targets, at the largest size measured (the targets are at 100k);
    the idle tick of waiting runs is held to the tick's target too (not a row of the issue)."""
    checks = [
        ("server peak RSS", row["served"]["peak_rss_mib"], TARGETS["rss_mib"], "MiB"),
        ("GET /runs?view=summary p50", row["served"]["summary_ms"], TARGETS["summary_ms"], "ms"),
        ("tick p50, pending copies", row["engine"]["p50_ms"], TARGETS["tick_ms"], "ms"),
        ("idle tick p50, waiting runs", row["runs"]["idle"]["p50_ms"], TARGETS["tick_ms"], "ms"),
    ]
    return [
        {
            "what": what,
            "n": row["n"],
            "value": value,
            "target": f"<= {limit:g} {unit}",
            "verdict": "PASS" if value <= limit else "MISS",
        }
        for what, value, limit, unit in checks
    ]


def _row_text(r: dict[str, Any]) -> str:
    s, e, w = r["served"], r["engine"], r["runs"]
    busy = w.get("busy")
    said = (
        f"; busy p50 {busy['p50_ms']:.0f} ms ({busy['decisions_p50']:,.0f} decisions an instant)"
        if busy
        else ""
    )
    return (
        f"{r['n']:,} workers: server RSS {s['rss_mib']:.0f} MiB (peak {s['peak_rss_mib']:.0f}), all made "
        f"in {s['made_s']:.1f} s, summary p50 {s['summary_ms']:.1f} ms; engine: admitting step "
        f"{e['admit_s']:.2f} s, then tick p50 {e['p50_ms']:.1f} ms (p95 {e['p95_ms']:.1f}); "
        f"{r['n']:,} waiting runs: admitting {w['admit_s']:.2f} s, "
        f"idle tick p50 {w['idle']['p50_ms']:.1f} ms{said}"
    )


def _table(rows: list[dict[str, Any]], growth: list[dict[str, Any]], verdicts: list[dict[str, Any]]) -> str:
    table = [
        (
            "workers (10 arrays)",
            "RSS MiB",
            "peak MiB",
            "summary p50 ms",
            "tick p50 ms",
            "p95 ms",
            "waiting runs: idle tick p50 ms",
            "busy p50 ms",
        )
    ]
    for r in rows:
        s, e, w = r["served"], r["engine"], r["runs"]
        busy = w.get("busy")
        table.append(
            (
                f"{r['n']:,}",
                f"{s['rss_mib']:.0f}",
                f"{s['peak_rss_mib']:.0f}",
                f"{s['summary_ms']:.1f}",
                f"{e['p50_ms']:.1f}",
                f"{e['p95_ms']:.1f}",
                f"{w['idle']['p50_ms']:.1f}",
                f"{busy['p50_ms']:.0f}" if busy else "-",
            )
        )
    out = "\n" + grid(table, right=tuple(range(1, 8)))
    for g in growth:
        said = ", ".join(f"{k} x{v:.2f}" for k, v in g["ratios"].items() if v is not None)
        out += f"\n  growth {g['from']:,} -> {g['to']:,}: {said} (n log n: x{g['n_log_n']:.1f})"
    out += (
        "\n  busy: waiting runs that start as others end; each time the first run blocked for room"
        "\n  changes, every run behind it gets the new reason (it names that run): one decision each"
    )
    checks = [("target (issue 19)", "workers", "measured", "target", "verdict")]
    for v in verdicts:
        checks.append((v["what"], f"{v['n']:,}", f"{v['value']:g}", v["target"], v["verdict"]))
    return out + "\n\n" + grid(checks, right=(1, 2))
