"""``python -m bench [--n 10000] [--only validate] [--big]``: validate against its floors, a
multi-document file against separate files, control plane, plan and watch, the first apply
(and one killed and resumed), the control plane holding workers, and the server under a team's
open-loop load (``--only server-load [--rate R] [--seconds S]``); then one summary of issue
19's targets with each verdict and the growth of each figure (``bench.summary``). ``--only
commands [--size N]``: the commands typed all day against a server of N runs (``bench.commands``).

Sizes: the figures of issue 19's table are measured on a ladder of sizes, ``--n`` / 10 and
``--n`` (1,000 and 10,000 by default), and with ``--big`` also ``--big-n`` (100,000 by default;
minutes), each folder of specs generated in a temporary folder and never committed. The other
parts run at ``--n`` only.

Every figure is a cold process (the page cache warmed first, by reading every file once, and
astra's bytecode compiled, as for an installed package), repeated and reported as the median;
the rounds interleave the commands, so drift on the machine spreads over all of them. Ratios
compare figures of the same run only; the floors are measured in the same run.
"""

from __future__ import annotations

import argparse
import compileall
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
from pathlib import Path

from . import summary
from .hotpath import profile_grid, profile_validate
from .measure import grid, run_cold
from .specs import MAX_LINES, MIN_LINES, write_specs
from .startup import not_needed, parse_importtime, top_level
from .validate import SCHEMA, check_validate, script

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).resolve().parent / "out" / "validate.json"
PARTS = (
    "validate",
    "floor",
    "check-jsonschema",
    "multidoc",
    "startup",
    "profile",
    "controlplane",
    "console",
    "plan",
    "apply",
    "workers",
    "ticks",
    "metrics",
    "git",
    "slurm",
    "commands",
    "server-load",
)
#: the parts that make their own server and state: ``--only`` them alone generates no specs
SELF_SEEDED = {"server-load"}


def _terminated(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main() -> int:
    args = _arguments()
    # a SIGTERM (a CI timeout, kill PID) ends the run through the finally blocks, which stop the
    # servers and remove the temporary folders
    signal.signal(signal.SIGTERM, _terminated)
    only = set(args.only or PARTS)
    py = sys.executable
    astra = script("astra")
    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="astra-bench-"))
    others = Path(tempfile.mkdtemp(prefix="astra-bench-ladder-"))
    ladder = {"small": max(args.n // 10, 1), "main": args.n} | ({"big": args.big_n} if args.big else {})
    report: dict = {
        "date": datetime.date.today().isoformat(),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
        "load_average": os.getloadavg(),
        "n": args.n,
        "ladder": ladder,
        "repeat": args.repeat,
        "folder": str(folder),
    }
    try:
        # astra's bytecode, as pip writes it for an installed package: an editable install under
        # PYTHONDONTWRITEBYTECODE (set on these machines) would compile every module in every run
        compileall.compile_dir(ROOT / "reconciler", quiet=1)
        if only == {"commands"}:  # a server of its own: no generated specs
            return _commands_only(report, astra, args)
        if only <= SELF_SEEDED:  # these parts make their own state: no specs to generate
            return _self_seeded(report, only, args)
        files = _prepare(folder, args.n, args.seed)
        report["bytes"] = sum(f.stat().st_size for f in files)
        print(_header(report, files))
        folders = {args.n: (folder, files)}
        if only & {"validate", "floor", "plan", "apply"}:
            for rung, n in ladder.items():
                if n not in folders:
                    where = others / rung
                    print(f"generating {n:,} specs for the {rung} size in {where}", flush=True)
                    folders[n] = (where, _prepare(where, n, args.seed))
        from . import validate

        report["validate"] = validate.main(folders, args.n, only, args.repeat, astra)
        if "multidoc" in only:
            from . import multidoc

            report["multidoc"] = multidoc.main(astra, mb=args.multidoc_mb, repeat=args.repeat)
        if "startup" in only:
            report["startup"] = _startup(py, astra, files[0], args.startup_runs)
            print(_startup_text(report["startup"]))
        if "profile" in only:
            report["profile"] = profile_validate(folder)
            print(_profile_text(report["profile"]))
        if "controlplane" in only:
            from . import controlplane

            print()
            report["controlplane"] = controlplane.main()
        if "console" in only:
            from . import console

            print()
            report["console"] = console.main()
        if "plan" in only:
            from . import plan

            sizes = {}
            for n in sorted(set(ladder.values())):
                where = folders[n][0]
                sizes[n] = plan.main(
                    where, n, repeat=args.repeat, changes=args.watch_changes, profile=n == args.n
                )
            report["plan"] = {"sizes": sizes, "figures": {n: r["figures"] for n, r in sizes.items()}}
        if "apply" in only:
            from . import apply

            print("\nfirst apply (astra apply -f DIR --yes) into an empty astra server:")
            report["apply"] = apply.main(folders, astra, resume_n=args.n)
        if "apply" in only or "workers" in only:
            from . import workers

            print("\nthe control plane holding workers (10 arrays on a cluster too small to run them):")
            report["workers"] = workers.main(sorted(set(ladder.values())))
        if "ticks" in only and args.only:  # measured by "workers" too: asked for by name
            from . import workers

            print("\nthe scheduler's ticks, in process (the workers part without its server):")
            report["ticks"] = workers.ticks(sorted(set(ladder.values())), cpu=args.cpu_time)
        if "metrics" in only:
            from . import metrics as scrape

            print("\none scrape of /metrics with every worker holding a GPU (issue 35):")
            report["metrics"] = scrape.main(sorted(set(ladder.values())))
        if "git" in only:
            from . import git

            print("\ngit sources:")
            report["git"] = git.main(args.n)
            for key, value in report["git"].items():
                print(f"  {key}: {value:.3f}" if isinstance(value, float) else f"  {key}: {value}")
        if "server-load" in only:
            from . import server_load

            print("\nthe server under a team's load (issue 33): an open-loop mix")
            report["server_load"] = server_load.main(args.rate, args.seconds, search=not args.no_search)
        if "slurm" in only and args.only:  # the local Slurm cluster is needed: asked for by name
            from . import slurm

            print("\nSlurm (the local cluster): a team's first apply and its warm plan:")
            report["slurm"] = slurm.main(astra, n=1000, rounds=args.repeat)
        if "commands" in only:
            from . import commands

            print(f"\nthe commands typed all day (issue 33), a server of {args.size:,} runs and an array:")
            report["commands"] = commands.main(astra, size=args.size, repeat=max(args.repeat, 10))
        report["summary"] = summary.build(report, ladder, args.big_n)
        print(summary.text(report["summary"]))
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"\nwritten: {OUT.relative_to(ROOT)}")
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(others, ignore_errors=True)
    return 0


def _commands_only(report: dict, astra: str, args: argparse.Namespace) -> int:
    """``--only commands``: that part alone, written to ``bench/out/commands.json``."""
    from . import commands

    print(f"astra bench, {report['date']}: Python {report['python']}, {report['machine']}")
    print(f"the commands typed all day (issue 33), a server of {args.size:,} runs and an array:")
    report["commands"] = commands.main(astra, size=args.size, repeat=max(args.repeat, 10))
    return _written(report, OUT.parent / "commands.json")


def _self_seeded(report: dict, only: set[str], args: argparse.Namespace) -> int:
    """The parts that need no generated specs (``SELF_SEEDED``), alone: their figures written
    to ``out/server-load.json`` (the specs' report is left as it was)."""
    from . import server_load

    print(f"astra bench, {report['date']}: Python {report['python']}, {report['machine']}")
    print("\nthe server under a team's load (issue 33): an open-loop mix")
    report["server_load"] = server_load.main(args.rate, args.seconds, search=not args.no_search)
    return _written(report, OUT.with_name("server-load.json"))


def _written(report: dict, out: Path) -> int:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"\nwritten: {out.relative_to(ROOT)}")
    return 0


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=" ".join(__doc__.split("\n\n")[0].split())
    )
    parser.add_argument("--n", type=int, default=10_000, help="how many run specs (default 10000)")
    parser.add_argument(
        "--only",
        action="append",
        choices=PARTS,
        help="run only this part (repeatable): " + ", ".join(PARTS),
    )
    parser.add_argument("--repeat", type=int, default=3, help="cold runs per command (default 3)")
    parser.add_argument(
        "--multidoc-mb", type=float, default=10.0, help="multidoc part: the file's size in MB (default 10)"
    )
    parser.add_argument("--startup-runs", type=int, default=10, help="runs per start-up figure")
    parser.add_argument(
        "--watch-changes", type=int, default=20, help="plan part: one-file changes under watch (default 20)"
    )
    parser.add_argument(
        "--big",
        action="store_true",
        help="also measure issue 19's figures at --big-n specs (validate, plan, apply, workers: minutes)",
    )
    parser.add_argument(
        "--big-n", type=int, default=100_000, help="the big size, with --big (default 100000; smaller to try)"
    )
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="ticks part: the CPU time of the process, not wall time (to compare versions on a busy machine)",
    )
    parser.add_argument(
        "--size",
        type=int,
        default=10_000,
        help="commands part: the server's runs, and its array's copies (default 10000)",
    )
    parser.add_argument(
        "--rate", type=float, default=200.0, help="server-load: requests a second offered (default 200)"
    )
    parser.add_argument(
        "--seconds", type=float, default=60.0, help="server-load: seconds of load at --rate (default 60)"
    )
    parser.add_argument(
        "--no-search", action="store_true", help="server-load: skip the step search for the highest rate held"
    )
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--dir", help="generate into this folder (kept) instead of a temporary one")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    return parser.parse_args()


def _prepare(folder: Path, n: int, seed: int) -> list[Path]:
    """Generate the specs, and refuse to go on unless every one is valid."""
    modeline = f"# yaml-language-server: $schema={SCHEMA}"
    files = write_specs(folder, n, seed=seed, modeline=modeline)
    lines = [f.read_text(encoding="utf-8").count("\n") for f in files]
    if not all(MIN_LINES <= k <= MAX_LINES for k in lines):
        raise SystemExit(
            f"bench: spec lengths {min(lines)}..{max(lines)} lines, not {MIN_LINES}..{MAX_LINES}"
        )
    run = run_cold([script("astra"), "validate", str(folder)])
    check_validate(run, "astra validate (the generated specs must be valid)", n)
    return files


# ---- start-up -------------------------------------------------------------------------------


def _startup(py: str, astra: str, one: Path, runs: int) -> dict:
    commands = {
        "python -c pass": [py, "-c", "pass"],
        "astra validate ONEFILE": [astra, "validate", str(one)],
        "python -m reconciler.cli validate ONEFILE": [py, "-m", "reconciler.cli", "validate", str(one)],
        "astra --help (typer)": [astra, "--help"],
    }
    walls: dict[str, list[float]] = {k: [] for k in commands}
    rss: dict[str, list[int]] = {k: [] for k in commands}
    for argv in commands.values():
        run_cold(argv)  # bytecode, page cache
    for _ in range(runs):
        for name, argv in commands.items():
            run = run_cold(argv)
            if run.code != 0:
                raise SystemExit(f"bench: {name} exited {run.code}:\n{run.stderr}")
            walls[name].append(run.wall)
            rss[name].append(run.rss_kib)
    timed = run_cold([py, "-X", "importtime", astra, "validate", str(one)])
    imports = parse_importtime(timed.stderr)
    base = statistics.median(walls["python -c pass"])
    return {
        "runs": runs,
        "commands": {
            name: {
                "median_ms": round(statistics.median(w) * 1000, 1),
                "over_bare_ms": round((statistics.median(w) - base) * 1000, 1),
                "peak_rss_mib": round(statistics.median(rss[name]) / 1024, 1),
            }
            for name, w in walls.items()
        },
        "importtime_total_ms": round(sum(i.cumulative_us for i in imports if i.level == 0) / 1000, 1),
        "top_imports": [
            {"module": i.name, "cumulative_ms": round(i.cumulative_us / 1000, 1)} for i in top_level(imports)
        ],
        "not_needed": not_needed(imports),
    }


# ---- text -----------------------------------------------------------------------------------


def _header(report: dict, files: list[Path]) -> str:
    lines = [f.read_text(encoding="utf-8").count("\n") for f in files]
    return "\n".join(
        [
            f"astra bench, {report['date']}: Python {report['python']}, {report['machine']}",
            f"{report['n']} valid run specs, {min(lines)}-{max(lines)} lines "
            f"(mean {statistics.mean(lines):.1f}), {report['bytes'] / 1e6:.1f} MB, "
            f"in {len({f.parent for f in files})} folders; page cache warmed; "
            f"each figure the median of {report['repeat']} cold processes",
        ]
    )


def _startup_text(s: dict) -> str:
    rows = [("start-up (one file)", "median ms", "over bare ms", "peak RSS MiB")]
    for name, c in s["commands"].items():
        rows.append((name, f"{c['median_ms']:.1f}", f"{c['over_bare_ms']:+.1f}", f"{c['peak_rss_mib']:.1f}"))
    out = [f"\nmedian of {s['runs']} runs each", grid(rows, right=(1, 2, 3))]
    rows = [("top-level import (astra validate ONEFILE)", "cumulative ms")]
    rows += [(i["module"], f"{i['cumulative_ms']:.1f}") for i in s["top_imports"]]
    out += [
        "",
        f"-X importtime: {s['importtime_total_ms']:.1f} ms of imports in all",
        grid(rows, right=(1,)),
    ]
    if s["not_needed"]:
        out.append("\nimported but not needed by validate:")
        for x in s["not_needed"]:
            chain = " -> ".join(x["chain"])
            out.append(f"  NOT NEEDED {x['package']} ({x['modules']} modules, {x['self_ms']} ms): {chain}")
    else:
        names = ", ".join(s_ for s_ in ("pydantic", "typer", "click", "rich", "ruamel", "jsonschema", "yaml"))
        out.append(f"\nnot imported by astra validate (checked): {names}: PASS")
    return "\n".join(out)


def _profile_text(p: dict) -> str:
    head = (
        f"\nprofile: {p['documents']} documents; {p['unprofiled_s']:.3f} s unprofiled, "
        f"{p['profiled_s']:.3f} s under cProfile; top 10 by own time"
    )
    return head + "\n" + profile_grid("own time (cProfile, validate_files in-process)", p["top"], 78)


if __name__ == "__main__":
    sys.exit(main())
