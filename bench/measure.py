"""Cold processes, timed: wall time and peak RSS of each child, from ``os.wait4``.

``ru_maxrss`` from ``wait4`` is the peak of the largest single process: the child's own, or of
a process it forked and reaped, whichever is larger; it does not add up processes that run at
once (a plan that loads on every core forks). ``run_cold(argv, tree=True)`` also samples the
sum of the proportional set size (``Pss``: shared pages split between the processes sharing
them, so a forked copy is not counted twice) of every process the command runs, every
``TREE_EVERY`` seconds: the peak of that sum is ``Run.tree_kib``. Sampling costs CPU, so a
timed run is never a sampled one.
"""

from __future__ import annotations

import os
import selectors
import statistics
import subprocess
import sys
import threading
from dataclasses import dataclass, field

__all__ = ["Run", "Sample", "grid", "run_cold", "samples_table"]


@dataclass
class Run:
    """One command's cold run (or a batch of processes run one after another)."""

    wall: float  # seconds
    rss_kib: int  # peak resident set of the largest process
    code: int
    stdout: str
    stderr: str
    processes: int = 1
    #: the peak of the summed Pss of the command's processes (``run_cold(tree=True)``), else 0
    tree_kib: int = 0


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


def run_cold(argv: list[str], *, cwd: str | None = None, tree: bool = False) -> Run:
    """Start ``argv`` as a new process and wait for it: its wall time and its own peak RSS
    (both taken by a small launcher, see ``_LAUNCHER``); with ``tree``, the peak of its
    processes' summed Pss too (``Run.tree_kib``)."""
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
    sampler = _TreeSampler(proc.pid) if tree else None
    out, err = _drain(proc)  # both pipes, before reaping: a chatty child never blocks
    proc.wait()
    tree_kib = sampler.stop() if sampler else 0
    with os.fdopen(read, "rb") as f:
        report = f.read().decode().split()
    if proc.returncode != 0 or len(report) != 3:
        raise RuntimeError(
            f"the launcher failed ({proc.returncode}): {err.decode('utf-8', 'replace')[-500:]}"
        )
    wall, rss, code = float(report[0]), int(report[1]), int(report[2])
    return Run(
        wall, rss, code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), tree_kib=tree_kib
    )


#: seconds between two samples of a process tree's memory
TREE_EVERY = 0.01


class _TreeSampler:
    """A thread summing the ``Pss`` of the launcher's descendants (not the launcher's own)
    every ``TREE_EVERY`` seconds, until ``stop()``, which answers the peak sum (KiB)."""

    def __init__(self, launcher: int):
        self.launcher, self.peak = launcher, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.wait(TREE_EVERY):
            self.peak = max(self.peak, sum(_pss_kib(pid) for pid in _descendants(self.launcher)))

    def stop(self) -> int:
        self._done.set()
        self._thread.join()
        return self.peak


def _descendants(root: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
            parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], list(parents.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(parents.get(pid, []))
    return out


def _pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


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


def samples_table(samples: list[Sample], n: int, *, rate: bool) -> str:
    """Each sample's median, per spec (and specs/s with ``rate``), peak RSS, spread and runs; then
    the command each stands for."""
    head = (
        "command",
        "wall s",
        "us/spec",
        *(("specs/s",) if rate else ()),
        "peak RSS MiB",
        "spread",
        "runs (s)",
    )
    rows = [head]
    for s in samples:
        rows.append(
            (
                s.name,
                f"{s.wall:.3f}",
                f"{s.wall / n * 1e6:.0f}",
                *((f"{n / s.wall:,.0f}",) if rate else ()),
                f"{s.rss_mib:.1f}",
                f"{s.spread:.0%}",
                " ".join(f"{r.wall:.2f}" for r in s.runs),
            )
        )
    notes = [f"  {s.name}: {s.command}" for s in samples]
    return "\n" + grid(rows, right=range(1, len(head) - 1)) + "\n" + "\n".join(notes)
