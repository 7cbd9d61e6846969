"""Cold processes, timed: wall time and peak RSS of each child, from ``os.wait4``."""

from __future__ import annotations

import os
import selectors
import statistics
import subprocess
import sys
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


#: Starts the measured command from a small process and reports its wall time and its own
#: rusage on the pipe whose fd it is given. Linux folds the memory a process had before
#: ``exec`` into its peak RSS, so a child forked from the bench itself (hundreds of MiB once it
#: has seeded a server) would report the bench's size; one forked from this launcher starts at
#: a few MiB.
_LAUNCHER = """
import os, sys, time
start = time.perf_counter()
pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - start
os.write(int(sys.argv[1]), f"{wall} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}".encode())
"""


def run_cold(argv: list[str], *, cwd: str | None = None) -> Run:
    """Start ``argv`` as a new process and wait for it: its wall time and its own peak RSS
    (both taken by a small launcher, see ``_LAUNCHER``)."""
    read, write = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-S", "-c", _LAUNCHER, str(write), *argv],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            pass_fds=(write,),
        )
    finally:
        os.close(write)
    out, err = _drain(proc)  # both pipes, before reaping: a chatty child never blocks
    proc.wait()
    with os.fdopen(read, "rb") as f:
        report = f.read().decode().split()
    if proc.returncode != 0 or len(report) != 3:
        raise RuntimeError(
            f"the launcher failed ({proc.returncode}): {err.decode('utf-8', 'replace')[-500:]}"
        )
    wall, rss, code = float(report[0]), int(report[1]), int(report[2])
    return Run(wall, rss, code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


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
