"""The server's loop (``server._schedule``): the workers' processes start outside the API's gate.

A step holds the gate, which every route holds while it runs; starting processes (a fork each)
does not: a request is answered while a slice of starts goes on, and the step after the starts
comes at once (it writes their facts). The engine and executor here are stand-ins that record
what the loop asks of them; the loop is the server's own."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

from reconciler.controlplane.api.gate import Gate
from reconciler.controlplane.server import _schedule


class _Clock:
    def now(self) -> float:
        return 0.0


class _Engine:
    """Steps recorded with what they were asked; ``start_processes`` blocks until released."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.more = False
        self.starting = threading.Event()
        self.release = threading.Event()
        self.stepped_again = threading.Event()
        self.executor = SimpleNamespace(queued={"w-0": object()}, busy=True)

    def step(self, now: float, *, start: bool = True) -> int:
        self.calls.append(f"step start={start}")
        if "start_processes" in self.calls:
            self.stepped_again.set()
        return 0

    def start_processes(self) -> int:
        self.calls.append("start_processes")
        self.starting.set()
        assert self.release.wait(10), "the test never released the starts"
        self.executor.queued = {}
        return 1

    def next_wakeup(self, now: float) -> None:
        return None


def test_a_request_takes_the_gate_while_processes_start_and_a_step_follows_them():
    engine = _Engine()
    api = SimpleNamespace(gate=Gate(), metrics=SimpleNamespace(record_tick=lambda seconds: None))

    async def a_write_route() -> None:
        async with api.gate:
            pass

    async def scenario() -> list[str]:
        loop = asyncio.create_task(_schedule(engine, engine.executor, _Clock(), asyncio.Event(), api))
        try:
            assert await asyncio.to_thread(engine.starting.wait, 10), "no process was started"
            # a route that writes, while the starts go on: the gate is free
            await asyncio.wait_for(a_write_route(), 5)
            before_release = list(engine.calls)
            engine.release.set()
            assert await asyncio.to_thread(engine.stepped_again.wait, 10), "no step after the starts"
            return before_release
        finally:
            loop.cancel()
            await asyncio.gather(loop, return_exceptions=True)

    before_release = asyncio.run(scenario())
    assert before_release == ["step start=False", "start_processes"]
    assert engine.calls[:3] == ["step start=False", "start_processes", "step start=False"]
