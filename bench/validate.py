"""Benchmark of ``astra validate`` against its floors, at each size of the ladder.

``main(folders, main_n, parts, repeat)``: for each size (a folder of that many generated specs),
``astra validate DIR`` and the floor, yaml-rs alone walking DIR, reading and parsing every file
in one process (one core); at the main size also PyYAML's C loader (a reference) and
check-jsonschema with the same schema. Each command is a cold process; every round runs every
command of every size once, in turn (so drift on the machine spreads over all of them), and
each figure is the median of the rounds. Ratios compare figures of the same run and size.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from . import targets
from .measure import Run, Sample, grid, run_cold, samples_table

__all__ = ["SCHEMA", "check_validate", "main", "script"]

SCHEMA = Path(__file__).resolve().parent.parent / "schema" / "run.schema.json"
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
#: ``astra validate DIR`` with some of its checks taken away (references at the main size, no
#: verdict): what reading and parsing cost on every core, and what the schema check adds, so that
#: the ratio to the one-core floor can be read as parse, schema, and the rest.
WITHOUT = """\
import sys
from reconciler import cli, desired
from reconciler.runspec import validate
none = lambda *args, **kwargs: []
desired.lint = validate.check_limits = validate.check_rules = none
{more}
cli.main(["validate", sys.argv[1]])
"""
REFERENCES = {
    "astra: parse only": ("desired.validate_data = none", "astra validate DIR, no check at all"),
    "astra: schema only": ("", "astra validate DIR, the JSON Schema check only"),
}
VALIDATE, FLOOR, CHECK = "astra validate DIR", "floor: yaml-rs", "check-jsonschema FILES"


def main(
    folders: dict[int, tuple[Path, list[Path]]], main_n: int, parts: set[str], repeat: int, astra: str
) -> dict[str, Any]:
    """Every size's samples, tables and ratios; ``figures``: each size's medians (s)."""
    py = sys.executable
    commands: dict[tuple[int, str], tuple[list[str] | None, Any, str]] = {}
    for n, (folder, _) in sorted(folders.items()):
        if "validate" in parts:
            commands[(n, VALIDATE)] = ([astra, "validate", str(folder)], check_validate, "astra validate DIR")
        for name, (imports, load) in FLOORS.items():
            if "floor" in parts and (name == "yaml-rs" or n == main_n):
                code = FLOOR_CODE.format(imports=imports, load=load)
                shown = f"python -c '<os.walk, read each file, {load}>' DIR"
                commands[(n, f"floor: {name}")] = ([py, "-c", code, str(folder)], _check_count, shown)
        if "check-jsonschema" in parts and n == main_n:
            commands[(n, CHECK)] = (None, None, "")
        if "validate" in parts and n == main_n:
            for name, (more, shown) in REFERENCES.items():
                argv = [py, "-c", WITHOUT.format(more=more), str(folder)]
                commands[(n, name)] = (argv, check_validate, shown)
    if not commands:
        return {}
    # warm-up: the page cache (read every file), and each command once on one folder (bytecode)
    for _, files in folders.values():
        for f in files:
            f.read_bytes()
    some = folders[main_n][1][0].parent
    for argv, _, _ in commands.values():
        if argv is not None:
            run_cold([*argv[:-1], str(some)])
    samples: dict[tuple[int, str], Sample] = {}
    for _ in range(repeat):
        for (n, name), (argv, check, shown) in commands.items():
            sample = samples.setdefault((n, name), Sample(name, shown))
            if argv is None:
                run = _check_jsonschema(folders[n][1])
                sample.command = run.stdout
            else:
                run = run_cold(argv)
                check(run, name, n)
            sample.runs.append(run)
    report: dict[str, Any] = {"sizes": {}, "figures": {}}
    for n in sorted(folders):
        mine = {name: s for (k, name), s in samples.items() if k == n}
        if not mine:
            continue
        ratios = _ratios(mine)
        print(
            f"\nvalidate, {n:,} specs:"
            + samples_table(list(mine.values()), n, rate=True)
            + _ratio_table(ratios)
        )
        report["sizes"][n] = {"measurements": {k: s.to_json(n) for k, s in mine.items()}, "ratios": ratios}
        figures = {}
        if VALIDATE in mine:
            figures["cold validate s"] = mine[VALIDATE].wall
        if FLOOR in mine:
            figures["yaml-rs floor s"] = mine[FLOOR].wall
        if CHECK in mine:
            figures["check-jsonschema s"] = mine[CHECK].wall
        report["figures"][n] = figures
    return report


def check_validate(run: Run, name: str, n: int) -> None:
    expected = f"{n} documents in {n} files are valid"
    if run.code != 0 or expected not in run.stderr:
        head = "\n".join((run.stdout + run.stderr).splitlines()[:20])
        raise SystemExit(f"bench: {name} exited {run.code}, not 0 with '{expected}':\n{head}")


def _check_count(run: Run, name: str, n: int) -> None:
    if run.code != 0 or run.stdout.strip() != str(n):
        raise SystemExit(f"bench: {name} exited {run.code} after {run.stdout.strip()!r} files:\n{run.stderr}")


def script(name: str) -> str:
    """The console script of this venv (what users run), not another one on PATH."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if not found:
        raise SystemExit(f"bench: {name} is not installed in {sys.prefix}")
    return found


def _check_jsonschema(files: list[Path]) -> Run:
    """One measurement: check-jsonschema on every file, in as few processes as the OS allows."""
    base = [script("check-jsonschema"), "--schemafile", str(SCHEMA)]
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
    v, f, c = (samples.get(k) for k in (VALIDATE, FLOOR, CHECK))
    if v and f:
        r, limit = v.wall / f.wall, targets.VALIDATE_FLOOR
        out.append(_ratio("validate / floor (yaml-rs, one core)", r, f"<= {limit:g}x", r <= limit))
    for name in REFERENCES:
        if samples.get(name) and f:
            r = samples[name].wall / f.wall
            out.append(_ratio(f"{name.removeprefix('astra: ')} / floor (reference)", r, "", None))
    if v and samples.get("floor: PyYAML C"):
        r = v.wall / samples["floor: PyYAML C"].wall
        out.append(_ratio("validate / PyYAML C (reference)", r, "", None))
    if v and c:
        r, least = c.wall / v.wall, targets.CHECK_JSONSCHEMA
        out.append(_ratio("check-jsonschema / validate", r, f">= {least:g}x", r >= least))
    return out


def _ratio(name: str, value: float, target: str, ok: bool | None) -> dict:
    verdict = "-" if ok is None else ("PASS" if ok else "MISS")
    return {"ratio": name, "value": round(value, 2), "target": target, "verdict": verdict}


def _ratio_table(ratios: list[dict]) -> str:
    if not ratios:
        return "\nratios: n/a (run the validate, floor and check-jsonschema parts together)"
    rows = [("ratio (same run)", "measured", "target", "verdict")]
    rows += [(r["ratio"], f"{r['value']:.2f}x", r["target"], r["verdict"]) for r in ratios]
    return "\n" + grid(rows, right=(1,))
