"""cProfile over ``validate_files`` on the generated folder, in this process."""

from __future__ import annotations

import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

__all__ = ["profile_grid", "profile_rows", "profile_validate"]


def profile_validate(folder: Path, top: int = 10) -> dict:
    from reconciler.runspec.validate import validate_files

    start = time.perf_counter()
    validate_files([folder])  # unprofiled: the figure cProfile's overhead inflates
    plain = time.perf_counter() - start

    profiler = cProfile.Profile()
    profiler.enable()
    documents, errors = validate_files([folder])
    profiler.disable()
    if errors:
        raise SystemExit(f"profile: {len(errors)} errors, first: {errors[0].format()}")
    stats = pstats.Stats(profiler)
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]  # type: ignore[attr-defined]
    return {
        "documents": len(documents),
        "unprofiled_s": round(plain, 3),
        "profiled_s": round(total, 3),
        "top": profile_rows(rows, total),
    }


def profile_rows(items: list, total: float) -> list[dict]:
    """``pstats`` rows (``(function, (cc, nc, tt, ct, callers))``) as the bench reports them."""
    return [
        {
            "function": _label(func),
            "calls": nc,
            "tottime_s": round(tt, 3),
            "share": round(tt / total, 3),
            "cumtime_s": round(ct, 3),
        }
        for func, (_cc, nc, tt, ct, _callers) in items
    ]


def profile_grid(title: str, rows: list[dict], width: int) -> str:
    """``profile_rows`` as a table under ``title`` (function names cut at ``width``)."""
    from .measure import grid

    table = [(title, "calls", "tottime s", "share", "cumtime s")]
    for r in rows:
        table.append(
            (
                r["function"][:width],
                str(r["calls"]),
                f"{r['tottime_s']:.3f}",
                f"{r['share']:.0%}",
                f"{r['cumtime_s']:.3f}",
            )
        )
    return grid(table, right=(1, 2, 3, 4))


def _label(func: tuple[str, int, str]) -> str:
    filename, line, name = func
    if filename == "~":
        return name  # a builtin: "<method 'read' of '_io.BufferedReader' objects>"
    path = filename
    for root in sorted({p for p in sys.path if p}, key=len, reverse=True):
        if filename.startswith(root + os.sep):
            path = filename[len(root) + 1 :]
            break
    return f"{path}:{line}({name})"
