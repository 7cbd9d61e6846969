"""A worker's log kept to a size: past ``LOG_BYTES`` its first part is cut, its last part kept,
and a line at its top says so.

Owns: cutting one log in place (``cut``), and its index (``logtimes``: each mark moved by the
bytes cut, so ``logs?since=`` still finds the kept lines' times). The worker writes its log
itself with ``O_APPEND`` (the executor opens it so), so after the cut its next write lands at
the new end, not at its old offset. A log is cut down to half its bound (whole lines: from the
first line that starts in the kept half), so a worker printing fast is cut once per half bound,
not at every look. Bytes the worker writes in the instant between the last read and the cut
are lost (microseconds; the line at the top says the log was cut).

Must not touch: processes, the scheduler, HTTP.
"""

from __future__ import annotations

import os
from pathlib import Path

from .logtimes import Marked, times_path

__all__ = ["LOG_BYTES", "cut", "cut_line"]

#: A worker's log keeps at most this many bytes (its last ones).
LOG_BYTES = 100 * 1024 * 1024


def cut_line(removed: int, bound: int) -> bytes:
    """The line at the top of a cut log."""
    return (
        f"astra: the first {removed} bytes of this log were cut: a worker's log keeps its last "
        f"{bound} bytes at most (docs/limits.md)\n"
    ).encode()


def cut(marked: Marked, bound: int = LOG_BYTES) -> bool:
    """Cut ``marked``'s log to its last half ``bound`` if it is over ``bound``; whether it was.
    A log that cannot be read or written is left as it is."""
    try:
        fd = os.open(marked.log, os.O_RDWR)
    except OSError:
        return False
    try:
        size = os.fstat(fd).st_size
        if size <= bound:
            return False
        start = size - bound // 2  # then on to the start of a line (the byte before is a newline)
        newline = os.pread(fd, 1 << 16, start - 1).find(b"\n")
        start += newline if newline >= 0 else 0
        kept = os.pread(fd, size - start, start)
        grown = os.fstat(fd).st_size  # what the worker wrote while it was read
        if grown > size:
            kept += os.pread(fd, grown - size, size)
        line = cut_line(start, bound)
        os.ftruncate(fd, 0)
        os.pwrite(fd, line + kept, 0)
        marked.size = len(line) + len(kept)
    except OSError:
        return False
    finally:
        os.close(fd)
    _shift_marks(marked.log, start - len(line), len(line))
    return True


def _shift_marks(log: Path, shift: int, floor: int) -> None:
    """Move each mark of the log's index back by ``shift`` bytes; those before ``floor`` (the
    cut bytes) go."""
    index = times_path(log)
    try:
        lines = index.read_bytes().split(b"\n")[:-1]
    except OSError:
        return
    moved = []
    for line in lines:
        try:
            offset, when = line.split()
            if int(offset) - shift > floor:
                moved.append(f"{int(offset) - shift} {when.decode()}\n")
        except ValueError:  # not a mark: dropped
            continue
    fresh = index.with_suffix(".times.cut")
    try:
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write("".join(moved))
        os.replace(fresh, index)
    except OSError:
        return
