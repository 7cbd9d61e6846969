"""``Gate``: the engines' gate, a first-come-first-served readers–writer lock for the event loop.

Owns ``Gate``. ``async with gate:`` holds it alone (a write: a route that changes something, the
scheduling loop's step); ``async with gate.shared():`` holds it with every other reader (a
route that only reads: a GET, which a ``read`` token may call). Readers run together; a writer
runs with no one else. What it protects is the engines' state in memory (``Engine.state``,
``meta``, ``processes``, ``generation``) and the store's rows written with it: a step or a
write changes them over many statements, in a worker thread, and a reader must see them from
before it or from after it, never half (``tests/controlplane_api/test_gate.py``).

Waiters are served in the order they came: a writer waits for the readers holding the gate,
and a reader that comes after a waiting writer waits behind it (a tick is never starved by a
stream of reads, and a read never by a stream of ticks: the scheduling loop steps again "after
the routes already waiting", as an ``asyncio.Lock`` served them). Readers queued together are
let in together.

Must not touch: what the holders do (routes, steps), threads (it is the loop's: every waiter
is a coroutine of the one event loop).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

__all__ = ["Gate"]


class Gate:
    """The readers–writer lock of the engines (see the module's docstring)."""

    def __init__(self) -> None:
        self._readers = 0
        self._writing = False
        #: waiters in order: (exclusive, the future set when it is let in)
        self._queue: deque[tuple[bool, asyncio.Future[None]]] = deque()

    def locked(self) -> bool:
        """Whether anyone holds it (a reader or a writer)."""
        return self._writing or self._readers > 0

    @property
    def readers(self) -> int:
        """How many readers hold it now."""
        return self._readers

    @property
    def waiting(self) -> int:
        """How many wait to be let in."""
        return sum(1 for _, let_in in self._queue if not let_in.done())

    async def __aenter__(self) -> None:
        await self._acquire(True)

    async def __aexit__(self, *exc: Any) -> None:
        self._release(True)

    @asynccontextmanager
    async def shared(self) -> AsyncIterator[None]:
        """Held with the other readers, for as long as the block runs."""
        await self._acquire(False)
        try:
            yield
        finally:
            self._release(False)

    def _free_for(self, exclusive: bool) -> bool:
        return not self._writing and (not exclusive or self._readers == 0)

    async def _acquire(self, exclusive: bool) -> None:
        if not self._queue and self._free_for(exclusive):
            self._take(exclusive)
            return
        let_in: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((exclusive, let_in))
        try:
            await let_in
        except asyncio.CancelledError:
            if let_in.done() and not let_in.cancelled():  # let in, then cancelled: give it back
                self._release(exclusive)
            else:  # gone from the queue: those behind it may go now
                self._let_in()
            raise

    def _take(self, exclusive: bool) -> None:
        if exclusive:
            self._writing = True
        else:
            self._readers += 1

    def _release(self, exclusive: bool) -> None:
        if exclusive:
            self._writing = False
        else:
            self._readers -= 1
        self._let_in()

    def _let_in(self) -> None:
        """Let in the waiters at the head of the queue that may go now, in order."""
        while self._queue:
            exclusive, let_in = self._queue[0]
            if let_in.done():  # cancelled while waiting
                self._queue.popleft()
                continue
            if not self._free_for(exclusive):
                return
            self._queue.popleft()
            self._take(exclusive)
            let_in.set_result(None)
