"""Benchmark of plan and watch: N specs against a live ``astra server`` that holds them all.

``main(folder, n)`` starts ``astra server`` (``bench.served``: SQLite, loopback, machines on
which no generated run fits, so no process is started), seeds it through its API with what an
apply of all ``n`` leaves, then measures, each as a cold process, the median of ``repeat``
interleaved rounds, after one round that is not counted (a server just seeded makes its
listings at their first reads):

* **cold plan**: ``astra plan -f DIR`` with the local cache folder deleted first;
* **warm plan**: the same with the cache the cold plan left (nothing changed);
* **the floor**: ``python -c`` walking DIR, reading and sha256-hashing every file;
* **cold validate**: ``astra validate DIR``.

Then one more cold plan, not timed, whose memory is sampled (``run_cold(tree=True)``): its peak
is the larger of the largest single process's ``ru_maxrss`` (its forked processes included)
and the peak of the summed ``Pss`` of all its processes at once. With ``profile``, one
in-process cProfile of the warm plan (the same calls the command makes); then ``astra watch``
(``bench.watch``) with ``changes`` one-file changes.

Each size has its own server, so the rounds interleave the commands of one size; the ratios
(warm plan ÷ floor, cold plan ÷ cold validate) compare figures of the same rounds. The targets
are ``bench.targets``'; the verdicts are in the final summary (``bench.summary``). The server
and the watch process are always stopped, whatever happens.
"""

from __future__ import annotations

import cProfile
import pstats
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import served, watch
from .hotpath import profile_grid, profile_rows
from .measure import Run, Sample, samples_table

__all__ = ["main"]

ANCHORS = (
    "Terraform: about 8 min to plan 1,600 resources",
    "Flux: 1,000 Kustomizations reconciled in 4 m 16 s",
)
FLOOR_CODE = """\
import hashlib, os, sys
n = 0
for root, dirs, files in os.walk(sys.argv[1]):
    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    for name in sorted(files):
        if name.endswith((".yaml", ".yml", ".json")) and not name.startswith("."):
            with open(os.path.join(root, name), "rb") as f:
                hashlib.sha256(f.read()).hexdigest()
            n += 1
print(n)
"""
SUMMARY = re.compile(r"Plan: (\d+) to create, (\d+) to update, (\d+) to replace, (\d+) to delete\.")


def main(
    folder: Path,
    n: int,
    *,
    repeat: int = 3,
    changes: int = 20,
    profile: bool = True,
    astra: str | None = None,
    py: str = sys.executable,
) -> dict[str, Any]:
    """Run the whole part at one size; print its tables; return its figures."""
    astra = astra or str(Path(py).parent / "astra")
    files = sorted(p for p in folder.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))
    if len(files) != n:
        raise SystemExit(f"bench plan: {len(files)} spec files in {folder}, not {n}")
    work = Path(tempfile.mkdtemp(prefix="astra-bench-plan-"))
    server: subprocess.Popen | None = None
    report: dict[str, Any] = {"n": n, "repeat": repeat}
    # a SIGTERM (a CI timeout, kill PID) ends this through the finally below, which stops the children
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        server, url = served.start_server(work, py)
        client_home = work / "client"
        client_home.mkdir()
        env = served.client_env(client_home)
        conn = ["--server", url, "--token", served.TOKEN, "--source", served.SOURCE]
        print(f"\nplan and watch: {n:,} specs against astra server at {url} (SQLite, loopback)")
        seed = served.seed(url, folder)
        held = served.count_runs(url)
        if held != n:
            raise SystemExit(f"bench plan: the server holds {held} runs after seeding, not {n}")
        report["seed"] = {"wall_s": round(seed, 3), "server_holds": held}
        print(
            f"server seeded through its API with what an apply of all {n:,} leaves (batches of runs, each "
            f"recorded in the source's inventory): {seed:.1f} s; server holds {held:,} runs"
        )

        # ---- cold plan, warm plan, the floor, cold validate: interleaved rounds -----------------
        cache = client_home / "cache"
        plan_argv = [astra, "plan", "-f", str(folder), *conn]
        commands = {
            "cold plan": (plan_argv, "astra plan -f DIR (cache folder deleted first)"),
            "warm plan": (plan_argv, "astra plan -f DIR (cache warm, nothing changed)"),
            "floor: read + sha256": (
                [py, "-c", FLOOR_CODE, str(folder)],
                "python -c '<os.walk, read each file, sha256>' DIR",
            ),
            "cold validate": ([astra, "validate", str(folder)], "astra validate DIR"),
        }
        samples = {name: Sample(name, shown) for name, (_, shown) in commands.items()}
        for f in files:
            f.read_bytes()  # the page cache
        for name, (argv, _) in commands.items():  # one round not counted: a server just seeded
            if name == "cold plan":  # builds what it keeps (its listings) at the first reads
                shutil.rmtree(cache, ignore_errors=True)
            _check_output(served.run_in(env, argv), name, n)
        for _ in range(repeat):
            for name, (argv, _) in commands.items():
                if name == "cold plan":
                    shutil.rmtree(cache, ignore_errors=True)
                run = served.run_in(env, argv)
                _check_output(run, name, n)
                samples[name].runs.append(run)
        report["measurements"] = {k: s.to_json(n) for k, s in samples.items()}
        print(samples_table(list(samples.values()), n, rate=False))
        warm, floor = samples["warm plan"].wall, samples["floor: read + sha256"].wall
        cold, validate = samples["cold plan"].wall, samples["cold validate"].wall

        # ---- the peak memory of a cold plan: one more, sampled, not timed -----------------------
        shutil.rmtree(cache, ignore_errors=True)
        sampled = served.run_in(env, plan_argv, tree=True)
        _check_output(sampled, "cold plan", n)
        peak = max(sampled.rss_kib, sampled.tree_kib) / 1024
        report["cold_plan_memory"] = {
            "largest_process_mib": round(sampled.rss_kib / 1024, 1),
            "all_processes_pss_mib": round(sampled.tree_kib / 1024, 1),
            "peak_mib": round(peak, 1),
        }
        m = report["cold_plan_memory"]
        print(
            f"cold plan's peak memory (one more, sampled): {peak:.0f} MiB (largest process "
            f"{m['largest_process_mib']:.0f} MiB; all its processes at once, "
            f"Pss {m['all_processes_pss_mib']:.0f} MiB)"
        )

        # ---- one profile of the warm plan, in this process --------------------------------------
        if profile:
            report["profile"] = _profile_warm(folder, url, cache)
            print(_profile_text(report["profile"]))

        # ---- one file changed under astra watch ------------------------------------------------
        w = report["watch"] = watch.measure(folder, files, url, env, conn, changes, astra)
        report["figures"] = {
            "cold plan s": cold,
            "warm plan s": warm,
            "read + sha256 s": floor,
            "cold validate (plan part) s": validate,
            "cold plan peak MiB": peak,
            "watch p50 ms": w["done_p50_ms"],
        }
        report["anchors"] = list(ANCHORS)
        print(
            f"\nwarm plan / floor {warm / floor:.2f}x, cold plan / cold validate {cold / validate:.2f}x "
            f"(what a cold plan adds to validate: {(cold - validate) * 1000:.0f} ms); "
            f"anchors, for context: {ANCHORS[0]}; {ANCHORS[1]}.\n"
            f"here: {n:,} runs planned cold in {cold:.1f} s, warm in {warm:.2f} s; one changed file "
            f"applied by watch in {w['done_p50_ms'] / 1000:.2f} s (p50)"
        )
        return report
    finally:
        if server is not None:
            served.stop(server, signal.SIGTERM, 60)
        shutil.rmtree(work, ignore_errors=True)
        signal.signal(signal.SIGTERM, previous)


def _terminated(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def _check_output(run: Run, name: str, n: int) -> None:
    served.check(run, name)
    if name.endswith("plan"):
        m = SUMMARY.search(run.stdout)
        if not m or m.groups() != ("0", "0", "0", "0"):
            found = m.group(0) if m else "no summary line"
            raise SystemExit(f"bench plan: {name} should change nothing, but: {found}")
    elif name == "cold validate":
        if f"{n} documents in {n} files are valid" not in run.stderr:
            raise SystemExit(f"bench plan: {name}: {run.stderr[-500:]}")
    elif run.stdout.strip() != str(n):
        raise SystemExit(f"bench plan: {name} read {run.stdout.strip()!r} files, not {n}")


# ---- the profile --------------------------------------------------------------------------------


def _profile_warm(folder: Path, url: str, cache: Path, top: int = 12) -> dict[str, Any]:
    """cProfile over what ``astra plan`` does after its imports: connect, load (warm), plan, render."""
    from reconciler.cli.planning import setup
    from reconciler.collector import gc_paused
    from reconciler.load import FileCache
    from reconciler.plan import plan_to_json, render_plan
    from reconciler.reconcile import plan_source

    def once() -> str:
        with gc_paused():  # as the command runs it
            s = setup([str(folder)], source=served.SOURCE, state=None, server=url, token=served.TOKEN)
            made = plan_source(s.source, s.cluster, s.store, time.time(), cache=FileCache(cache))
            return render_plan(plan_to_json(made))

    once()  # every module imported, the cache warm
    start = time.perf_counter()
    once()
    plain = time.perf_counter() - start
    profiler = cProfile.Profile()
    profiler.enable()
    once()
    profiler.disable()
    stats = pstats.Stats(profiler)
    total = stats.total_tt  # type: ignore[attr-defined]
    raw = stats.stats  # type: ignore[attr-defined]
    by_own = sorted(raw.items(), key=lambda kv: -kv[1][2])[:top]
    by_cum = sorted(raw.items(), key=lambda kv: -kv[1][3])
    cum = [kv for kv in by_cum if "reconciler" in kv[0][0] or "httpx" in kv[0][0]][:top]

    return {
        "unprofiled_s": round(plain, 3),
        "profiled_s": round(total, 3),
        "top_own": profile_rows(by_own, total),
        "top_cumulative": profile_rows(cum, total),
    }


# ---- text ---------------------------------------------------------------------------------------


def _profile_text(p: dict[str, Any]) -> str:
    out = [
        f"\nprofile of the warm plan, in-process after the imports: {p['unprofiled_s']:.3f} s unprofiled, "
        f"{p['profiled_s']:.3f} s under cProfile"
    ]
    for key, title in (("top_own", "by own time"), ("top_cumulative", "by cumulative time (astra, httpx)")):
        out += ["", profile_grid(f"top {len(p[key])} {title}", p[key], 84)]
    return "\n".join(out)


if __name__ == "__main__":
    import argparse

    from .specs import write_specs

    parser = argparse.ArgumentParser(prog="python -m bench.plan", description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--dir", help="generate into this folder, or use the specs already there")
    args = parser.parse_args()
    schema = Path(__file__).resolve().parent.parent / "schema" / "run.schema.json"
    where = Path(args.dir or tempfile.mkdtemp(prefix="astra-bench-"))
    try:
        if not any(where.rglob("*.y*ml")):
            write_specs(where, args.n, modeline=f"# yaml-language-server: $schema={schema}")
        main(where, args.n, repeat=args.repeat, changes=args.changes)
    finally:
        if not args.dir:
            shutil.rmtree(where, ignore_errors=True)
