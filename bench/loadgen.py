"""An open-loop HTTP load generator on raw asyncio: requests sent on schedule, timed from it.

``open_loop(host, port, plan, seconds)`` runs ``plan.clients`` clients, each sending one request
every ``plan.clients / plan.rate`` seconds (the first at a random phase, so the sends spread over
each second), for ``seconds``. It is **open loop**: a client sends on its schedule whether or
not its last request was answered (a busy connection is not waited for: another is opened), and
each latency is measured from the *scheduled* send time, not from when the request could be
sent. A closed-loop client (the next request once the last is answered) slows down with the
server and never sees the queue it would have met: coordinated omission, which hides exactly the
tail this measures.

The client is plain ``asyncio`` streams speaking HTTP/1.1 with keep-alive (a request's bytes
prepared once; an answer read by its ``Content-Length``, or chunked), so that the generator,
which shares the machine's cores with the server, spends as little of them as it can: httpx's
async client costs several times more CPU per request. ``Request.make`` gives each send its
(kind, method, path, body); ``Sample`` is one answer (or failure).

Used by ``bench.server_load``. Nothing here is a test.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Plan", "Sample", "open_loop", "percentile"]

#: how long one request may take before it is counted as a failure (seconds)
TIMEOUT = 30.0


@dataclass(frozen=True)
class Plan:
    """What to send: ``clients`` clients at ``rate`` requests a second in all; ``make(client, k,
    rng)`` gives the k-th request of a client as (kind, method, path, body bytes or None)."""

    clients: int
    rate: float
    make: Callable[[int, int, random.Random], tuple[str, str, str, bytes | None]]
    token: str
    seed: int = 33


@dataclass(slots=True)
class Sample:
    kind: str
    #: seconds from the scheduled send to the whole answer read
    latency: float
    status: int
    #: what failed, when no answer came (a refused connection, a timeout)
    error: str = ""


@dataclass
class _Pool:
    """One client's idle keep-alive connections."""

    host: str
    port: int
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = field(default_factory=list)

    async def take(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.idle:
            return self.idle.pop()
        return await asyncio.open_connection(self.host, self.port)

    def give(self, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
        self.idle.append(conn)

    def close(self) -> None:
        for _, w in self.idle:
            w.close()
        self.idle.clear()


def _request_bytes(host: str, method: str, path: str, token: str, body: bytes | None) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return (head + "\r\n").encode() + (body or b"")


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """The status of one answer, its body read whole; whether the connection stays open."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    return status, headers.get("connection", "").lower() != "close"


async def _one(pool: _Pool, data: bytes, kind: str, due: float, out: list[Sample]) -> None:
    try:
        conn = await pool.take()
        conn[1].write(data)
        status, keep = await asyncio.wait_for(_read_answer(conn[0]), TIMEOUT)
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError) as exc:
        out.append(Sample(kind, time.perf_counter() - due, 0, type(exc).__name__))
        return
    out.append(Sample(kind, time.perf_counter() - due, status))
    if keep:
        pool.give(conn)
    else:
        conn[1].close()


async def _client(
    i: int, plan: Plan, pool: _Pool, start: float, seconds: float, out: list[Sample], tasks: set
) -> None:
    """Client ``i``: its requests at ``start + phase + k·period``, each sent at its time."""
    rng = random.Random(plan.seed * 1_000_003 + i)
    period = plan.clients / plan.rate
    due = start + rng.random() * period
    k = 0
    while due < start + seconds:
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        kind, method, path, body = plan.make(i, k, rng)
        data = _request_bytes(pool.host, method, path, plan.token, body)
        task = asyncio.ensure_future(_one(pool, data, kind, due, out))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        k += 1
        due += period


async def open_loop(host: str, port: int, plan: Plan, seconds: float) -> list[Sample]:
    """Every answer of ``plan`` sent for ``seconds`` (and the last ones awaited)."""
    out: list[Sample] = []
    tasks: set = set()
    pools = [_Pool(host, port) for _ in range(plan.clients)]
    start = time.perf_counter() + 0.2
    await asyncio.gather(
        *(_client(i, plan, pools[i], start, seconds, out, tasks) for i in range(plan.clients))
    )
    if tasks:
        await asyncio.wait(set(tasks), timeout=TIMEOUT + 5)
    for p in pools:
        p.close()
    return out


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values``, nearest rank (NaN when there are none)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]
