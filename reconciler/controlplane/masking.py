"""A worker's log with its run's secret values replaced by ``***`` as it is written.

Owns: ``pump`` (a thread that reads a worker's output from a pipe and writes it, masked by
``reconciler.masking.Masker``, to its log file: re-exported here with its constants). Done where
the log is written, so no copy of the log (``astra logs``, the console, the file under the
server's home) ever holds a value.

Masking is a safety net, not a boundary: a worker may print its value encoded (base64, reversed,
a byte at a time with other output between), and that is not caught (docs/secrets.md).

Must not touch: the values' source (the executor passes them in), the store, the scheduler.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ..masking import LINE_MIN, MASK, Masker

__all__ = ["LINE_MIN", "MASK", "Masker", "pump"]

_READ = 65536


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
