"""When each line of a worker's log was written: a small index beside the log (``WORKER.N.times``).

Owns the index's form and both its ends: ``LogMarks`` (the executor's: how far each worker's log
has grown, at the control plane's clock) and ``read_since`` (the API's: a log from a time on).

Why an index, and not a time on each line: a worker writes its log itself (its stdout and stderr
ARE the file, as before), so a worker printing 100,000 lines runs as fast as without astra, and
the log stays byte for byte what the worker wrote (``astra logs`` prints it as it is). Every
``MARK_EVERY`` seconds of the control plane's clock (less often while very many workers run:
``LogMarks.interval``) the executor reads each running worker's log size, one ``stat``, and
when it grew, appends one line to the log's index::

    OFFSET TIME      the log held OFFSET bytes at TIME (seconds since the epoch)

and once more when the worker ends. The bytes between two marks were written after the first
mark's time and by the second's, so a line's time is known to within one interval: what
``--since 10m`` needs. A line counts as written when its last byte was marked (a line is shown
whole or not at all), and ``since`` is inclusive: a line that may have been written at ``since``
or later is shown. Bytes after the last mark (a worker that wrote since it, or a log left by a
server that stopped first; a log without an index, from an older astra, is all such bytes) count
as written when the log last changed (its mtime; never later than now).

Must not touch: the processes (the executor's), the scheduler, HTTP.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MARKS_PER_SECOND", "MARK_EVERY", "LogMarks", "Marked", "read_since", "since_offset", "times_path"]

#: Seconds of the control plane's clock between two looks at the running workers' logs.
MARK_EVERY = 1.0
#: At most this many logs looked at per second: with 10,000 workers running, every 5 s.
MARKS_PER_SECOND = 2000
#: The index's files are the server's, as its logs are (the worker never sees them).
_MODE = 0o600


def times_path(log: Path) -> Path:
    """The index of ``logs/RUN/WORKER.N.log``: ``logs/RUN/WORKER.N.times``."""
    return log.with_suffix(".times")


@dataclass(slots=True)
class Marked:
    """One log being marked: its path and its size at its last mark."""

    log: Path
    size: int = 0


@dataclass
class LogMarks:
    """The executor's side: marks logs as they grow (``mark``), all of them each interval (``due``)."""

    #: when the next round of marks is due (the clock's seconds)
    next_round: float = field(default=float("-inf"))

    @staticmethod
    def interval(logs: int) -> float:
        """Seconds between two rounds over ``logs`` logs: ``MARK_EVERY``, longer past ``MARKS_PER_SECOND``."""
        return max(MARK_EVERY, logs / MARKS_PER_SECOND)

    @staticmethod
    def mark(marked: Marked, now: float) -> None:
        """Append ``SIZE NOW`` to the log's index if the log grew since its last mark.

        A log that cannot be read (its folder removed with its run) is left: no mark, no error."""
        try:
            size = os.stat(marked.log).st_size
            if size <= marked.size:
                return
            fd = os.open(times_path(marked.log), os.O_WRONLY | os.O_APPEND | os.O_CREAT, _MODE)
            try:
                os.write(fd, f"{size} {now:.3f}\n".encode())  # one short append: never torn
            finally:
                os.close(fd)
        except OSError:
            return
        marked.size = size

    def due(self, now: float) -> bool:
        """A round of marks is due at ``now``."""
        return now >= self.next_round

    def round(self, logs: list[Marked], now: float) -> None:
        """Mark every log of ``logs`` at ``now``; the next round is due an interval later."""
        for marked in logs:
            self.mark(marked, now)
        self.next_round = now + self.interval(len(logs))


def _marks(path: Path) -> tuple[list[int], list[float]]:
    """The index's offsets and times (times never going back); empty when there is none."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], []
    offsets: list[int] = []
    times: list[float] = []
    for line in data.split(b"\n")[:-1]:  # the last piece is empty (or a mark being written)
        try:
            offset, when = line.split()
            offsets.append(int(offset))
            times.append(max(float(when), times[-1]) if times else float(when))
        except ValueError:  # not a mark: skipped
            continue
    return offsets, times


def since_offset(data: bytes, offsets: list[int], times: list[float], since: float, tail: float) -> int:
    """Where the lines of ``data`` written at ``since`` or later start.

    ``offsets`` and ``times`` are the marks (the log held ``offsets[i]`` bytes at ``times[i]``);
    bytes after the last mark count as written at ``tail``. The first chunk whose time is
    ``since`` or later starts the answer, from the beginning of the line its first byte is in."""
    if not offsets or offsets[-1] < len(data):
        offsets, times = [*offsets, len(data)], [*times, max(tail, times[-1]) if times else tail]
    i = bisect.bisect_left(times, since)
    if i == len(times):
        return len(data)
    cut = offsets[i - 1] if i else 0
    if cut >= len(data):
        return len(data)
    return data.rfind(b"\n", 0, cut) + 1


def read_since(log: Path, since: float, now: float) -> bytes:
    """The lines of ``log`` written at ``since`` (seconds since the epoch) or later, as bytes;
    ``FileNotFoundError`` when there is no log."""
    offsets, times = _marks(times_path(log))
    data = log.read_bytes()
    tail = min(now, os.stat(log).st_mtime)
    return data[since_offset(data, offsets, times, since, tail) :]
