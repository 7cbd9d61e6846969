"""Benchmark of ``astra watch``: one file changed → the run updated on the server.

``measure(folder, files, url, env, conn, changes)`` starts ``astra watch DIR`` as a child (its
interval a day, so only the file change wakes it). After its first pass (``Ready``), ``changes``
times one file's ``owner`` label is rewritten (a different file each time), and two latencies
are taken from the write: until the run's ``resource_version`` changed on the server (polled
every 5 ms: the change is live), and until watch printed its ``Ready`` line for that pass (the
apply done, bookkeeping included: the figure the target is checked against). The files are
written back and the watch process is stopped, whatever happens.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from . import served

__all__ = ["measure", "pct"]

WATCH_READY_TIMEOUT = 1800.0
CHANGE_TIMEOUT = 120.0


def measure(
    folder: Path, files: list[Path], url: str, env: dict[str, str], conn: list[str], changes: int, astra: str
) -> dict[str, Any]:
    """The first pass's time and each change's two latencies, with their p50 and p95."""
    watcher: _Watcher | None = None
    originals: dict[Path, bytes] = {}
    try:
        watcher = _Watcher([astra, "watch", str(folder), "--interval", "86400", *conn], env)
        ready = watcher.wait_for(lambda line: " Ready " in line, WATCH_READY_TIMEOUT)
        print(f"\nastra watch: first full pass Ready after {ready:.1f} s; now {changes} one-file changes")
        picks = [files[(i * 7919) % len(files)] for i in range(changes)]
        for p in picks:
            originals.setdefault(p, p.read_bytes())
        live_ms, ready_ms = [], []
        for i, path in enumerate(picks):
            to_live, to_done = _one_change(watcher, url, path, i)
            live_ms.append(to_live)
            ready_ms.append(to_done)
    finally:
        if watcher is not None:
            watcher.stop()
        for path, data in originals.items():
            path.write_bytes(data)
    w = {
        "first_pass_s": round(ready, 3),
        "changes": changes,
        "detected_by": "live: the run's resource_version changed (GET every 5 ms); "
        "done: watch printed Ready for the pass",
        "live_ms": [round(x, 1) for x in live_ms],
        "done_ms": [round(x, 1) for x in ready_ms],
        "live_p50_ms": round(pct(live_ms, 50), 1),
        "live_p95_ms": round(pct(live_ms, 95), 1),
        "done_p50_ms": round(pct(ready_ms, 50), 1),
        "done_p95_ms": round(pct(ready_ms, 95), 1),
    }
    print(
        f"write → run updated on the server: p50 {w['live_p50_ms']:.0f} ms, p95 {w['live_p95_ms']:.0f} ms\n"
        f"write → watch's pass done (Ready): p50 {w['done_p50_ms']:.0f} ms, p95 {w['done_p95_ms']:.0f} ms"
    )
    return w


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


class _Watcher:
    """``astra watch`` as a child; its output lines, each with the monotonic time it arrived."""

    def __init__(self, argv: list[str], env: dict[str, str]):
        self.proc = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            bufsize=0,
            start_new_session=True,
        )
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        self.seen: list[str] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        self.started = time.monotonic()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            self.lines.put((time.monotonic(), raw.decode("utf-8", "replace").rstrip()))
        self.lines.put((time.monotonic(), "<eof>"))

    def next_line(self, deadline: float) -> tuple[float, str]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        try:
            at, line = self.lines.get(timeout=left)
        except queue.Empty:
            raise TimeoutError from None
        self.seen.append(line)
        if line == "<eof>":
            tail = "\n".join(self.seen[-20:])
            raise SystemExit(f"bench watch: astra watch exited {self.proc.wait()}:\n{tail}")
        return at, line

    def wait_for(self, match, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while True:
            try:
                at, line = self.next_line(deadline)
            except TimeoutError:
                tail = "\n".join(self.seen[-20:])
                raise SystemExit(
                    f"bench watch: astra watch not Ready within {timeout:g} s:\n{tail}"
                ) from None
            if " Stalled " in line:
                raise SystemExit(f"bench watch: astra watch stalled: {line}")
            if match(line):
                return at - self.started

    def stop(self) -> None:
        """SIGTERM to its process group (SIGINT may be ignored in a background job), then SIGKILL."""
        if self.proc.poll() is None:
            with _suppress():
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with _suppress():
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return exc[0] is not None and issubclass(exc[0], ProcessLookupError)


def _one_change(watcher: _Watcher, url: str, path: Path, i: int) -> tuple[float, float]:
    """Rewrite the file's ``owner`` label; the ms until the run is updated live, and until Ready."""
    text = path.read_text(encoding="utf-8")
    name = re.search(r"^  name: (\S+)$", text, re.M)
    if name is None or not re.search(r"^    owner: \S+$", text, re.M):
        raise SystemExit(f"bench watch: {path} has no metadata.name or owner label to change")
    run = name.group(1)
    changed = re.sub(r"^    owner: \S+$", f"    owner: bench-{i}", text, count=1, flags=re.M)
    with served.client(url) as c:
        before = c.get(f"/runs/{run}").json()["metadata"]["resource_version"]
        while not watcher.lines.empty():  # nothing left over from the last pass
            watcher.next_line(time.monotonic() + 1)
        t0 = time.monotonic()
        path.write_text(changed, encoding="utf-8")
        deadline = t0 + CHANGE_TIMEOUT
        live = None
        while live is None:
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"bench watch: {run} was not updated on the server within {CHANGE_TIMEOUT:g} s"
                )
            version = c.get(f"/runs/{run}").json()["metadata"]["resource_version"]
            if version != before:
                live = time.monotonic()
                break
            time.sleep(0.005)
    while True:
        try:
            at, line = watcher.next_line(deadline)
        except TimeoutError:
            raise SystemExit(
                f"bench watch: no Ready from watch within {CHANGE_TIMEOUT:g} s of the write"
            ) from None
        if " Ready " in line and "1 updated" in line:
            done = at
            break
        if " Ready " in line or " Stalled " in line or "Reconciling" in line:
            raise SystemExit(f"bench watch: watch did not apply exactly one update: {line}")
    return (live - t0) * 1000, (done - t0) * 1000
