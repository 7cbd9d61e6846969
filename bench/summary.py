"""The final summary: every row of issues 19 and 29's table with its verdict, and the growth of each figure.

``build(report, ladder, big)`` reads the figures the parts returned (each part's ``figures``:
size → name → value, medians of the same run) and answers the rows (what, size, measured,
target, verdict) and the growth table; ``text(summary)`` prints them. A row whose size was not
measured says why: ``not run (--big)`` for the 100,000 rows of a run without ``--big``, ``not
run (--only)`` when its part was left out. The targets and the growth check are
``bench.targets``'.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from . import targets
from .measure import grid

__all__ = ["build", "text"]

Figures = dict[str, float]

#: the figures whose growth is reported: (the parts' name, what the table calls it)
GROWTH = (
    ("cold validate s", "cold astra validate, s"),
    ("yaml-rs floor s", "yaml-rs parse alone, one core, s"),
    ("warm plan s", "warm astra plan, s"),
    ("read + sha256 s", "read + sha256, s"),
    ("cold plan s", "cold astra plan, s"),
    ("cold plan peak MiB", "cold astra plan, peak memory, MiB"),
    ("watch p50 ms", "astra watch, one file, p50 ms"),
    ("first apply s", "first astra apply, s"),
    ("server peak RSS", "server holding the workers, peak RSS MiB"),
    ("summary p50", "GET /runs?view=summary p50 ms"),
    ("tick p50 (copies)", "a tick with the copies pending, p50 ms"),
)


def _ratio(a: str, b: str) -> Callable[[Figures], float | None]:
    return lambda f: f[a] / f[b] if a in f and b in f else None


def _one(a: str) -> Callable[[Figures], float | None]:
    return lambda f: f.get(a)


def _per_spec(seconds: float) -> Callable[[int], float]:
    return lambda n: n * seconds


#: a row's limit, at most: a figure, one made from the size, or ``None``: reported, no target
Limit = float | Callable[[int], float] | None

#: the rows: (what, the ladder's rungs it is held at, its value from a size's figures, its
#: limit, its unit)
ROWS: tuple[tuple[str, tuple[str, ...], Callable[[Figures], float | None], Limit, str], ...] = (
    (
        "cold validate / yaml-rs parse (one core)",
        ("main", "big"),
        _ratio("cold validate s", "yaml-rs floor s"),
        targets.VALIDATE_FLOOR,
        "x",
    ),
    (
        "warm plan, nothing changed",
        ("main", "big"),
        _one("warm plan s"),
        _per_spec(targets.WARM_PLAN_S_PER_SPEC),
        "s",
    ),
    ("warm plan / read + sha256", ("main", "big"), _ratio("warm plan s", "read + sha256 s"), None, "x"),
    # issue 29 withdrew its target (issue 19's 1.3x): reported
    ("cold plan / cold validate", ("main",), _ratio("cold plan s", "cold validate (plan part) s"), None, "x"),
    (
        "first apply, empty server",
        ("main", "big"),
        _one("first apply s"),
        _per_spec(1 / targets.APPLY_RUNS_PER_S),
        "s",
    ),
    (
        "resumed apply: killed + resumed",
        ("main",),
        _one("resumed apply s"),
        _per_spec(1 / targets.APPLY_RUNS_PER_S),
        "s",
    ),
    ("watch: one file changed -> done, p50", ("main",), _one("watch p50 ms"), targets.WATCH_P50_MS, "ms"),
    (
        "server holding the workers, peak RSS",
        ("big",),
        _one("server peak RSS"),
        targets.WORKERS["rss_mib"],
        "MiB",
    ),
    ("GET /runs?view=summary, p50", ("big",), _one("summary p50"), targets.WORKERS["summary_ms"], "ms"),
    (
        "a tick with the copies pending, p50",
        ("big",),
        _one("tick p50 (copies)"),
        targets.WORKERS["tick_ms"],
        "ms",
    ),
    ("cold plan, peak memory", ("big",), _one("cold plan peak MiB"), targets.PLAN_PEAK_MIB, "MiB"),
)


def build(report: dict[str, Any], ladder: dict[str, int], big_n: int) -> dict[str, Any]:
    """The rows and the growth; ``ladder``: the sizes measured (``small``, ``main``, and ``big``
    when ``--big`` was given); ``big_n``: the big size, named in its rows when it was not."""
    figures: dict[int, Figures] = {}
    for part in ("validate", "plan", "apply", "workers"):
        for n, named in (report.get(part) or {}).get("figures", {}).items():
            figures.setdefault(int(n), {}).update(named)
    rows = []
    for what, rungs, value_of, at_most, unit in ROWS:
        for rung in rungs:
            n = ladder.get(rung, big_n)
            value = value_of(figures.get(n, {})) if rung in ladder else None
            limit = at_most(n) if callable(at_most) else at_most
            rows.append(_row(what, n, value, limit, unit, rung in ladder))
    growth = []
    for name, shown in GROWTH:
        have = [(n, figures[n][name]) for n in sorted(figures) if name in figures[n]]
        steps = []
        for (a, fa), (b, fb) in itertools.pairwise(have):
            bound = targets.nlogn_bound(a, b)
            ratio = fb / fa if fa else float("inf")
            steps.append(
                {
                    "from": a,
                    "to": b,
                    "ratio": round(ratio, 2),
                    "n_log_n": round(bound, 2),
                    "ok": ratio <= bound,
                }
            )
        if steps:
            verdict = "PASS" if all(s["ok"] for s in steps) else "MISS"
            values = {n: round(v, 4) for n, v in have}
            growth.append({"figure": shown, "values": values, "steps": steps, "verdict": verdict})
    return {"ladder": ladder, "rows": rows, "growth": growth}


def _row(
    what: str, n: int, value: float | None, limit: float | None, unit: str, measured: bool
) -> dict[str, Any]:
    if value is None:
        verdict = "not run (--only)" if measured else "not run (--big)"
    elif limit is None:
        verdict = "reported"
    else:
        verdict = "PASS" if value <= limit else "MISS"
    return {
        "what": what,
        "size": n,
        "measured": None if value is None else round(value, 3),
        "unit": unit,
        "target": "-" if limit is None else f"<= {limit:.1f}x" if unit == "x" else f"<= {limit:g} {unit}",
        "verdict": verdict,
    }


def text(summary: dict[str, Any]) -> str:
    table = [("issues 19, 29: what", "size", "measured", "target", "verdict")]
    for r in summary["rows"]:
        shown = "-" if r["measured"] is None else _value(r["measured"], r["unit"])
        table.append((r["what"], f"{r['size']:,}", shown, r["target"], r["verdict"]))
    growth = [("growth of each figure (at most n log n)", "values", "ratios (n log n allows)", "verdict")]
    for g in summary["growth"]:
        values = " -> ".join(f"{v:,.0f}" if v >= 100 else f"{v:.3g}" for v in g["values"].values())
        ratios = ", ".join(f"x{s['ratio']:.2f} (x{s['n_log_n']:.1f})" for s in g["steps"])
        growth.append((g["figure"], values, ratios, g["verdict"]))
    sizes = " -> ".join(f"{n:,}" for n in sorted(set(summary["ladder"].values())))
    return (
        f"\nsummary (issues 19 and 29), sizes {sizes}; one run, each figure a median of the same run\n"
        + grid(table, right=(1, 2))
        + "\n\n"
        + grid(growth)
    )


def _value(v: float, unit: str) -> str:
    if unit == "x":
        return f"{v:.2f}x"
    return f"{v:.2f} s" if unit == "s" else f"{v:,.1f} {unit}"
