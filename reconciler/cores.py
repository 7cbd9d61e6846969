"""``on_every_core(work, shares)``: ``work(i, share)`` for each share of a job, the first in this
process and the others in processes forked from it (so each starts with every import done), as
many as there are cores; the answers in order, pickled back (``aside``: a fork
costs a millisecond, where a ``ProcessPoolExecutor`` costs 17 ms of imports and threads).
``Turns(chunks)`` hands a job's chunks out to whichever process asks first: a process slowed
down (its core shared with other work, as a plan's read-ahead) takes fewer, and none waits idle
at the end for another's fixed share (``Turns.cut(items, size)``: the last chunks smaller).

Only a process without other threads is forked (a fork copies none of them, nor the locks they
hold): ``forkable(n, minimum)`` says whether ``n`` items are worth it here. Used by
``astra validate`` (``reconciler.check``) and by a cold load (``reconciler.load.parallel``).

``aside(work)`` runs ``work()`` in one forked process while this one goes on; ``result()`` is
its answer, pickled back (a plan reads the cluster there while it loads its files here). The
answer goes through an unnamed file (in memory: Linux's ``memfd``; else a temporary file), not
a pipe: the forked process writes it whole
and ends at once, so that its memory (the copies it made, what it read) is not kept while this
one is still busy (through a pipe it would wait, holding all of it, until this one reads).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import IO, Any, TypeVar

__all__ = ["Aside", "Turns", "alone", "aside", "cores", "forkable", "on_every_core"]

T = TypeVar("T")


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def alone() -> bool:
    """Whether this process runs no thread but this one (none was started where ``threading``
    was never imported: its import costs validate's start-up 0.4 ms)."""
    threading = sys.modules.get("threading")
    return threading is None or threading.active_count() == 1


def forkable(n: int, minimum: int) -> bool:
    """Whether ``n`` items are worth splitting over forked processes here."""
    return n >= minimum and cores() > 1 and hasattr(os, "fork") and alone()


class Turns:
    """``chunks`` taken in turn by the processes of ``on_every_core(work, turns.shares())``, each
    ``work`` looping on ``taken()``: every chunk is taken once, by whichever process asks first.
    Their numbers sit in a pipe, written whole before any process is forked (at most ``MOST``:
    4 KiB, what the smallest pipe holds); reading one (two bytes, less than ``PIPE_BUF``) is
    atomic. ``close()`` once done."""

    MOST = 2048

    def __init__(self, chunks: Sequence[Any]):
        if len(chunks) > self.MOST:
            raise ValueError(f"at most {self.MOST} chunks, not {len(chunks)}")
        self._chunks = chunks
        self._read, write = os.pipe()
        try:
            os.write(write, b"".join(i.to_bytes(2, "little") for i in range(len(chunks))))
        finally:
            os.close(write)  # once read to the end, a read answers nothing: no chunk is left

    @classmethod
    def cut(cls, items: Sequence[T], size: int) -> Turns:
        """``items`` in chunks of ``size``, larger when that would make more than ``MOST``; once
        fewer are left than two chunks a core, each chunk is a quarter of what is left (on two
        cores), down to a tenth of ``size``: the processes then end within a small chunk's time
        of each other, where whole chunks left one waiting for another half a chunk's time on
        average."""
        n = len(items)
        size = max(size, -(-n // cls.MOST))
        least, ways, at = max(1, size // 10), 2 * cores(), 0
        chunks: list[Sequence[T]] = []
        while at < n:
            step = min(size, max(least, (n - at) // ways))
            chunks.append(items[at : at + step])
            at += step
        if len(chunks) > cls.MOST:  # too few chunks to taper: whole ones
            chunks = [items[at : at + size] for at in range(0, n, size)]
        return cls(chunks)

    @property
    def chunks(self) -> Sequence[Any]:
        """The chunks, in their order (a chunk's number is its place here)."""
        return self._chunks

    def shares(self) -> list[Turns]:
        """One share a core: each is this."""
        return [self] * cores()

    def taken(self) -> Iterator[Any]:
        """The chunks this process takes, one at a time, until none is left."""
        for _number, chunk in self.numbered():
            yield chunk

    def numbered(self) -> Iterator[tuple[int, Any]]:
        """``taken()``, each chunk with its place in ``chunks``."""
        while len(number := os.read(self._read, 2)) == 2:
            at = int.from_bytes(number, "little")
            yield at, self._chunks[at]

    def close(self) -> None:
        os.close(self._read)


def on_every_core(work: Callable[[int, Any], T], shares: Sequence[Any]) -> list[T]:
    """``[work(0, shares[0]), work(1, shares[1]), …]``, the first here and the rest in forked
    processes, all at once."""
    if len(shares) < 2:
        return [work(i, share) for i, share in enumerate(shares)]
    others = [aside(partial(work, i, share)) for i, share in enumerate(shares) if i]
    try:
        return [work(0, shares[0]), *(other.result() for other in others)]
    finally:
        for other in others:  # those not reaped yet (this process or one of them failed)
            other.close()


class Aside:
    """``work()`` running in a forked process (see ``aside``)."""

    def __init__(self, pid: int, answer: IO[bytes]):
        self._pid, self._answer = pid, answer
        self._done = False

    def result(self) -> Any:
        """Its answer, once it has ended (what it raised is raised here)."""
        self._reap()
        with self._answer as f:
            f.seek(0)
            data = f.read()
        ok, value = pickle.loads(data) if data else (False, RuntimeError("the forked process died"))
        if not ok:
            raise value
        return value

    def close(self) -> None:
        """Stop it if it is still running (its answer is not wanted)."""
        if not self._done:
            import signal

            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            self._reap()
        self._answer.close()

    def _reap(self) -> None:
        if not self._done:
            os.waitpid(self._pid, 0)
            self._done = True


def aside(work: Callable[[], Any]) -> Aside:
    """``work()`` started in a forked process now. Fork only where ``forkable`` says so, and only
    work that shares nothing with this process but memory (no open connection): it ends with
    ``os._exit``, running none of this process's exit handlers, and writes nothing but its
    answer (into a temporary file this process reads once it has ended)."""
    answer = _unnamed_file()
    pid = os.fork()
    if pid == 0:  # the forked process
        try:
            try:
                data = pickle.dumps((True, work()), pickle.HIGHEST_PROTOCOL)
            except BaseException as exc:  # given to the caller, whatever it is
                try:
                    data = pickle.dumps((False, exc), pickle.HIGHEST_PROTOCOL)
                except Exception:
                    data = pickle.dumps((False, RuntimeError(f"{type(exc).__name__}: {exc}")))
            answer.write(data)
            answer.flush()
        finally:
            os._exit(0)
    return Aside(pid, answer)


def _unnamed_file() -> IO[bytes]:
    """A file with no name, for one answer: in memory where Linux has ``memfd_create`` (no
    import: ``tempfile`` costs 3 ms of a validate's start), else a temporary file."""
    if hasattr(os, "memfd_create"):
        return os.fdopen(os.memfd_create("astra-aside", os.MFD_CLOEXEC), "w+b")
    import tempfile

    return tempfile.TemporaryFile()  # ``Aside`` closes it
