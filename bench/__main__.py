"""``python -m bench [--n 10000] [--only validate] [--big]``: validate against its floors, a
multi-document file against separate files, control plane, plan, the first apply, and the
control plane holding 1,000 to 100,000 workers (``workers``, also part of ``--only apply``).

Every figure is a cold process (the page cache warmed first, by reading every file once, and
astra's bytecode compiled, as for an installed package), repeated and reported as the median;
the rounds interleave the commands, so drift on the machine spreads over all of them. Ratios
compare figures of the same run only.
"""

from __future__ import annotations

import argparse
import compileall
import datetime
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from .hotpath import profile_grid, profile_validate
from .measure import Run, Sample, grid, run_cold
from .specs import MAX_LINES, MIN_LINES, write_specs
from .startup import not_needed, parse_importtime, top_level

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "schema" / "run.schema.json"
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
    "git",
)
#: validate / yaml-rs floor, at most; check-jsonschema / validate, at least
TARGET_FLOOR, TARGET_CHECK = 1.5, 5.0

FLOOR_CODE = """\
import os, sys
{imports}
n = 0
for root, dirs, files in os.walk(sys.argv[1]):
    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    for name in sorted(files):
        if name.endswith((".yaml", ".yml", ".json")) and not name.startswith("."):
            with open(os.path.join(root, name), encoding="utf-8") as f:
                text = f.read()
            {load}
            n += 1
print(n)
"""
FLOORS = {
    "yaml-rs": ("import yaml_rs", "yaml_rs.loads(text)"),
    "PyYAML C": ("import yaml", "yaml.load(text, Loader=yaml.CSafeLoader)"),
}


def main() -> int:
    args = _arguments()
    only = set(args.only or PARTS)
    py = sys.executable
    astra = _script("astra")
    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="astra-bench-"))
    report: dict = {
        "date": datetime.date.today().isoformat(),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
        "n": args.n,
        "repeat": args.repeat,
        "folder": str(folder),
    }
    try:
        # astra's bytecode, as pip writes it for an installed package: an editable install under
        # PYTHONDONTWRITEBYTECODE (set on these machines) would compile every module in every run
        compileall.compile_dir(ROOT / "reconciler", quiet=1)
        files = _prepare(folder, args.n, args.seed)
        report["bytes"] = sum(f.stat().st_size for f in files)
        print(_header(report, files))
        samples: dict[str, Sample] = {}
        commands = {}
        if "validate" in only:
            commands["astra validate DIR"] = (
                [astra, "validate", str(folder)],
                _check_validate,
                "astra validate DIR",
            )
        if "floor" in only:
            for name, (imports, load) in FLOORS.items():
                code = FLOOR_CODE.format(imports=imports, load=load)
                shown = f"python -c '<os.walk, read each file, {load}>' DIR"
                commands[f"floor: {name}"] = ([py, "-c", code, str(folder)], _check_count, shown)
        if "check-jsonschema" in only:
            commands["check-jsonschema FILES"] = (None, None, "")
        # warm-up: the page cache (read every file), and each command once on one file (bytecode)
        for f in files:
            f.read_bytes()
        for argv, _, _ in commands.values():
            if argv is not None:
                run_cold([*argv[:-1], str(files[0].parent)])
        for _ in range(args.repeat):
            for name, (argv, check, shown) in commands.items():
                sample = samples.setdefault(name, Sample(name, shown))
                if argv is None:
                    run = _check_jsonschema(files)
                    sample.command = run.stdout
                else:
                    run = run_cold(argv)
                    check(run, name, args.n)
                sample.runs.append(run)
        if samples:
            print(_table(samples, args.n))
            report["measurements"] = {k: s.to_json(args.n) for k, s in samples.items()}
            report["ratios"] = _ratios(samples)
            print(_ratio_table(report["ratios"]))
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

            report["plan"] = plan.main(
                folder, args.n, repeat=args.repeat, changes=args.watch_changes, apply_n=args.apply_n
            )
        if "apply" in only:
            from . import apply

            print("\nfirst apply (astra apply -f DIR --yes) into an empty astra server:")
            sizes = sorted({min(1_000, args.n), args.n} | ({100_000} if args.big else set()))
            report["apply"] = apply.main(folder, files, sizes, astra)
        if "apply" in only or "workers" in only:
            from . import workers

            print("\nthe control plane holding workers (10 arrays on a cluster too small to run them):")
            report["workers"] = workers.main(list(workers.SIZES))
        if "git" in only:
            from . import git

            print("\ngit sources:")
            report["git"] = git.main(args.n)
            for key, value in report["git"].items():
                print(f"  {key}: {value:.3f}" if isinstance(value, float) else f"  {key}: {value}")
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"\nwritten: {OUT.relative_to(ROOT)}")
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
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
        "--apply-n", type=int, default=500, help="plan part: specs in the timed first apply (default 500)"
    )
    parser.add_argument(
        "--watch-changes", type=int, default=20, help="plan part: one-file changes under watch (default 20)"
    )
    parser.add_argument(
        "--big", action="store_true", help="apply part: also the first apply of 100,000 runs (minutes)"
    )
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--dir", help="generate into this folder (kept) instead of a temporary one")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    return parser.parse_args()


def _script(name: str) -> str:
    """The console script of this venv (what users run), not another one on PATH."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if not found:
        raise SystemExit(f"bench: {name} is not installed in {sys.prefix}")
    return found


def _prepare(folder: Path, n: int, seed: int) -> list[Path]:
    """Generate the specs, and refuse to go on unless every one is valid."""
    modeline = f"# yaml-language-server: $schema={SCHEMA}"
    files = write_specs(folder, n, seed=seed, modeline=modeline)
    lines = [f.read_text(encoding="utf-8").count("\n") for f in files]
    if not all(MIN_LINES <= k <= MAX_LINES for k in lines):
        raise SystemExit(
            f"bench: spec lengths {min(lines)}..{max(lines)} lines, not {MIN_LINES}..{MAX_LINES}"
        )
    run = run_cold([_script("astra"), "validate", str(folder)])
    _check_validate(run, "astra validate (the generated specs must be valid)", n)
    return files


def _check_validate(run: Run, name: str, n: int) -> None:
    expected = f"{n} documents in {n} files are valid"
    if run.code != 0 or expected not in run.stderr:
        head = "\n".join((run.stdout + run.stderr).splitlines()[:20])
        raise SystemExit(f"bench: {name} exited {run.code}, not 0 with '{expected}':\n{head}")


def _check_count(run: Run, name: str, n: int) -> None:
    if run.code != 0 or run.stdout.strip() != str(n):
        raise SystemExit(f"bench: {name} exited {run.code} after {run.stdout.strip()!r} files:\n{run.stderr}")


def _check_jsonschema(files: list[Path]) -> Run:
    """One measurement: check-jsonschema on every file, in as few processes as the OS allows."""
    exe = _script("check-jsonschema")
    base = [exe, "--schemafile", str(SCHEMA)]
    limit = min(os.sysconf("SC_ARG_MAX") // 2, 1 << 20) if hasattr(os, "sysconf") else 32_000
    chunks, chunk, size = [], [], 0
    for f in map(str, files):
        if chunk and size + len(f) + 1 > limit:
            chunks.append(chunk)
            chunk, size = [], 0
        chunk.append(f)
        size += len(f) + 1
    chunks.append(chunk)
    runs = [run_cold(base + chunk) for chunk in chunks]
    for run in runs:
        if run.code != 0:
            head = "\n".join((run.stdout + run.stderr).splitlines()[:20])
            raise SystemExit(f"bench: check-jsonschema exited {run.code}:\n{head}")
    batch = f" (in {len(runs)} batches, one after another)" if len(runs) > 1 else ""
    total = Run(sum(r.wall for r in runs), max(r.rss_kib for r in runs), 0, "", "", processes=len(runs))
    total.stdout = f"check-jsonschema --schemafile schema/run.schema.json FILES...{batch}"
    return total


def _ratios(samples: dict[str, Sample]) -> list[dict]:
    out = []
    v, f, c = (samples.get(k) for k in ("astra validate DIR", "floor: yaml-rs", "check-jsonschema FILES"))
    if v and f:
        r = v.wall / f.wall
        out.append(_ratio("validate / floor (yaml-rs)", r, f"<= {TARGET_FLOOR}x", r <= TARGET_FLOOR))
    if v and samples.get("floor: PyYAML C"):
        r = v.wall / samples["floor: PyYAML C"].wall
        out.append(_ratio("validate / PyYAML C (reference)", r, "", None))
    if v and c:
        r = c.wall / v.wall
        out.append(_ratio("check-jsonschema / validate", r, f">= {TARGET_CHECK}x", r >= TARGET_CHECK))
    return out


def _ratio(name: str, value: float, target: str, ok: bool | None) -> dict:
    verdict = "-" if ok is None else ("PASS" if ok else "MISS")
    return {"ratio": name, "value": round(value, 2), "target": target, "verdict": verdict}


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


def _table(samples: dict[str, Sample], n: int) -> str:
    rows = [("command", "wall s", "us/spec", "specs/s", "peak RSS MiB", "spread", "runs (s)")]
    for s in samples.values():
        rows.append(
            (
                s.name,
                f"{s.wall:.3f}",
                f"{s.wall / n * 1e6:.0f}",
                f"{n / s.wall:,.0f}",
                f"{s.rss_mib:.1f}",
                f"{s.spread:.0%}",
                " ".join(f"{r.wall:.2f}" for r in s.runs),
            )
        )
    notes = [f"  {s.name}: {s.command}" for s in samples.values()]
    return "\n" + grid(rows, right=range(1, 6)) + "\n" + "\n".join(notes)


def _ratio_table(ratios: list[dict]) -> str:
    if not ratios:
        return "\nratios: n/a (run the validate, floor and check-jsonschema parts together)"
    rows = [("ratio (same run)", "measured", "target", "verdict")]
    rows += [(r["ratio"], f"{r['value']:.2f}x", r["target"], r["verdict"]) for r in ratios]
    return "\n" + grid(rows, right=(1,))


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
