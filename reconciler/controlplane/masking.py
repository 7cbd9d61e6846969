"""A worker's log with its run's secret values replaced by ``***`` as it is written.

Owns: ``Masker`` (pure: bytes in, bytes out, across writes) and ``pump`` (a thread that reads a
worker's output from a pipe and writes it, masked, to its log file). GitHub Actions' masking,
done where the log is written, so no copy of the log (``astra logs``, the console, the file
under the server's home) ever holds a value:

* each value is masked wherever it appears, and, for a value of several lines, each of its
  lines of at least ``LINE_MIN`` bytes too (a key printed line by line);
* a value split across writes (``"hf_se"`` then ``"cret"``) is masked: the tail of a write
  that could begin a value is held back until the next write says whether it does (at most the
  longest value's length, less a byte), and written at the end of the output either way;
* the longest value is masked first, so a value inside another leaves no part shown.

Masking is a safety net, not a boundary: a worker may print its value encoded (base64, reversed,
a byte at a time with other output between), and that is not caught (docs/secrets.md).

Must not touch: the values' source (the executor passes them in), the store, the scheduler.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

__all__ = ["LINE_MIN", "MASK", "Masker", "pump"]

MASK = b"***"
#: A line of a value of several lines is masked on its own when at least this long.
LINE_MIN = 4
_READ = 65536


class Masker:
    """Replaces each of ``values`` by ``***`` in a stream given in pieces (``feed``, then ``end``)."""

    def __init__(self, values: Iterable[bytes]) -> None:
        found: set[bytes] = set()
        for v in values:
            if v:
                found.add(v)
            for line in v.splitlines():
                line = line.strip(b"\r")
                if len(line) >= LINE_MIN:
                    found.add(line)
        self.values = sorted(found, key=len, reverse=True)
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        """What may be written of the output so far, masked; a tail that may begin a value is kept."""
        text = self._held + data
        for v in self.values:
            text = text.replace(v, MASK)
        keep = self._prefix_tail(text)
        self._held = text[len(text) - keep :] if keep else b""
        return text[: len(text) - keep]

    def end(self) -> bytes:
        """The tail held back, at the end of the output (it began no value after all)."""
        out, self._held = self._held, b""
        return out

    def _prefix_tail(self, text: bytes) -> int:
        """The length of the longest tail of ``text`` that is a proper beginning of a value."""
        best = 0
        for v in self.values:
            for n in range(min(len(v) - 1, len(text)), best, -1):
                if text.endswith(v[:n]):
                    best = n
                    break
        return best


def pump(read_fd: int, log: Path, masker: Masker) -> threading.Thread:
    """Start a thread that copies ``read_fd`` (a worker's output) to ``log``, masked, until the
    output ends (every process of the worker closed it); ``read_fd`` is closed then."""

    def copy() -> None:
        with open(log, "ab", buffering=0) as out:
            try:
                while True:
                    data = os.read(read_fd, _READ)
                    if not data:
                        break
                    out.write(masker.feed(data))
                out.write(masker.end())
            except OSError:
                pass  # the log cannot be written: the worker goes on, its output is lost
            finally:
                os.close(read_fd)

    thread = threading.Thread(target=copy, name=f"mask {log.name}", daemon=True)
    thread.start()
    return thread
