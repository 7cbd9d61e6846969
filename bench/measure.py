"""Cold processes, timed: wall time and peak RSS of each child, from ``os.wait4``."""

from __future__ import annotations

import os
import selectors
import statistics
import subprocess
import time
from dataclasses import dataclass, field

__all__ = ["Run", "Sample", "grid", "run_cold"]


@dataclass
class Run:
    """One command's cold run (or a batch of processes run one after another)."""

    wall: float  # seconds
    rss_kib: int  # peak resident set of the largest process
    code: int
    stdout: str
    stderr: str
    processes: int = 1


@dataclass
class Sample:
    """Repeated runs of one command: the median is what is reported."""

    name: str
    command: str
    runs: list[Run] = field(default_factory=list)

    @property
    def wall(self) -> float:
        return statistics.median(r.wall for r in self.runs)

    @property
    def rss_mib(self) -> float:
        return statistics.median(r.rss_kib for r in self.runs) / 1024

    @property
    def spread(self) -> float:
        """(max − min) / median of the wall times."""
        walls = [r.wall for r in self.runs]
        return (max(walls) - min(walls)) / self.wall if self.wall else 0.0

    def to_json(self, n: int) -> dict:
        return {
            "command": self.command,
            "processes": self.runs[0].processes if self.runs else 0,
            "wall_s": [round(r.wall, 4) for r in self.runs],
            "median_wall_s": round(self.wall, 4),
            "us_per_spec": round(self.wall / n * 1e6, 1),
            "specs_per_s": round(n / self.wall, 1),
            "peak_rss_mib": round(self.rss_mib, 1),
            "spread": round(self.spread, 3),
        }


def run_cold(argv: list[str], *, cwd: str | None = None) -> Run:
    """Start ``argv`` as a new process and wait for it: its wall time and its own peak RSS."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    out, err = _drain(proc)  # both pipes, before reaping: a chatty child never blocks
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    return Run(wall, usage.ru_maxrss, code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


def _drain(proc: subprocess.Popen) -> tuple[bytes, bytes]:
    assert proc.stdout is not None and proc.stderr is not None
    names = {proc.stdout.fileno(): "out", proc.stderr.fileno(): "err"}
    chunks: dict[str, list[bytes]] = {"out": [], "err": []}
    sel = selectors.DefaultSelector()
    for stream in (proc.stdout, proc.stderr):
        sel.register(stream, selectors.EVENT_READ)
    while sel.get_map():
        for key, _ in sel.select():
            data = os.read(key.fd, 1 << 16)
            if data:
                chunks[names[key.fd]].append(data)
            else:
                sel.unregister(key.fileobj)
                key.fileobj.close()
    return b"".join(chunks["out"]), b"".join(chunks["err"])


def grid(rows: list[tuple[str, ...]], right=()) -> str:
    """Rows as a text table: the first row is the header, ``right`` the right-aligned columns."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    right = set(right)

    def line(r: tuple[str, ...]) -> str:
        cells = [
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    return "\n".join([line(rows[0]), "  ".join("-" * w for w in widths), *map(line, rows[1:])])
