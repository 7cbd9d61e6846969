"""The engines' gate: reads run together, a write runs alone, and a read never sees half a write.

``Gate`` alone (its order, its cancellations), then through the app: a read held inside its
work does not hold up another read, a write waits for it, and a read that came after the write
waits behind it and sees all of it. A batch of runs changes the scheduler's state, then the
store, then the runs' documents (``Engine.submit_batch``): a read in between would list runs
without their documents, so none may run in between.
"""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from reconciler.controlplane.api import create_app
from reconciler.controlplane.api.gate import Gate

from .conftest import TOKEN, Plane


def _run(name: str) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "task_template": {
                "image": "busybox",
                "command": "true",
                "time_limit_seconds": 60,
                "requested_resources": {"cpu_cores": 1, "gpu_requests": {"count": 1, "models": ["B200"]}},
            }
        },
    }


async def _until(predicate, what: str) -> None:
    """Let the loop run until ``predicate()`` holds (bounded: a few thousand turns)."""
    for _ in range(200_000):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never: {what}")


# ---- the lock alone ------------------------------------------------------------------------------


def test_readers_share_and_a_writer_waits_for_them():
    async def go():
        gate = Gate()
        order: list[str] = []
        first, second = gate.shared(), gate.shared()
        await first.__aenter__()
        await second.__aenter__()
        assert gate.readers == 2

        async def write():
            async with gate:
                order.append("write")

        writer = asyncio.ensure_future(write())
        await _until(lambda: gate.waiting == 1, "the writer waits")
        await first.__aexit__(None, None, None)
        await asyncio.sleep(0)
        assert order == [] and not writer.done()  # one reader still holds it
        await second.__aexit__(None, None, None)
        await writer
        assert order == ["write"] and not gate.locked()

    asyncio.run(go())


def test_waiters_are_let_in_in_the_order_they_came():
    """A reader behind a waiting writer waits for it (no stream of reads starves a tick); the
    readers queued together behind it go in together."""

    async def go():
        gate = Gate()
        order: list[str] = []

        async def read(name: str):
            async with gate.shared():
                order.append(name)
                await asyncio.sleep(0)

        async def write(name: str):
            async with gate:
                order.append(name)
                await asyncio.sleep(0)

        holder = gate.shared()
        await holder.__aenter__()
        came = (write("w1"), read("r1"), read("r2"), write("w2"), read("r3"))
        tasks = [asyncio.ensure_future(c) for c in came]
        await _until(lambda: gate.waiting == 5, "everyone waits")
        await holder.__aexit__(None, None, None)
        await asyncio.gather(*tasks)
        assert order == ["w1", "r1", "r2", "w2", "r3"]

    asyncio.run(go())


def test_a_cancelled_waiter_holds_no_one_up():
    async def go():
        gate = Gate()
        holder = gate.shared()
        await holder.__aenter__()

        async def write():
            async with gate:
                pass

        writer = asyncio.ensure_future(write())
        await _until(lambda: gate.waiting == 1, "the writer waits")
        reader_done = asyncio.Event()

        async def read():
            async with gate.shared():
                reader_done.set()

        reader = asyncio.ensure_future(read())
        await _until(lambda: gate.waiting == 2, "the reader waits behind the writer")
        writer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await writer
        await reader  # the writer gone, the reader joins the reader holding it
        assert reader_done.is_set()
        await holder.__aexit__(None, None, None)
        assert not gate.locked()

    asyncio.run(go())


# ---- through the app -----------------------------------------------------------------------------


def test_a_read_never_sees_half_a_write(tmp_path, monkeypatch):
    plane = Plane(tmp_path)
    try:
        _reads_and_a_write(plane, monkeypatch)
    finally:
        plane.close()


def _reads_and_a_write(plane: Plane, monkeypatch) -> None:
    app = create_app(plane.engine, TOKEN, plane.clock)
    gate: Gate = app.state.astra.gate
    inside, release = threading.Event(), threading.Event()
    listing = plane.engine.runs_of

    def held_listing(scope):  # the first summary listing waits inside its read, in its thread
        if not inside.is_set():
            inside.set()
            assert release.wait(60)
        return listing(scope)

    monkeypatch.setattr(plane.engine, "runs_of", held_listing)
    names = [f"batch-{i}" for i in range(5)]

    async def go():
        headers = {"Authorization": f"Bearer {TOKEN}"}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://astra.test", headers=headers) as c:
            first = asyncio.ensure_future(c.get("/api/runs", params={"view": "summary"}))
            await _until(inside.is_set, "the first read is inside")
            # another read goes in beside it and is answered while the first still reads
            other = await asyncio.wait_for(c.get("/api/workers"), 60)
            assert other.status_code == 200 and not first.done()
            write = asyncio.ensure_future(c.post("/api/runs:batch", json={"runs": [_run(n) for n in names]}))
            await _until(lambda: gate.waiting == 1, "the write waits for the read")
            late = asyncio.ensure_future(c.get("/api/runs", params={"view": "summary"}))
            await _until(lambda: gate.waiting == 2, "a later read waits behind the write")
            assert not write.done() and not late.done()
            release.set()
            before, written, after = await first, await write, await late
        assert written.status_code == 200, written.text
        assert [i["name"] for i in before.json()["items"]] == []
        assert [i["name"] for i in after.json()["items"]] == names

    asyncio.run(go())
