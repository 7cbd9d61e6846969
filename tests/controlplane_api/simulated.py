"""An engine driven by a simulated executor on the manual clock, its app, and calls into it."""

from __future__ import annotations

import asyncio

import httpx
from prometheus_client.parser import text_string_to_metric_families

from reconciler.controlplane.api import create_app
from reconciler.controlplane.clock import ManualClock
from reconciler.controlplane.engine import Engine
from reconciler.controlplane.inventory import load_inventory
from reconciler.controlplane.simulation import Outcome, SimulatedExecutor
from reconciler.controlplane.store import Store

TOKEN = "test-token"


class Served:
    """An engine with a simulated executor, its app, a manual clock, and calls into the app."""

    def __init__(
        self, tmp_path, inventory: dict, start: float = 1_000_000.0, audit_keep: int = 10_000
    ) -> None:
        self.tmp_path, self.inventory, self.audit_keep = tmp_path, inventory, audit_keep
        self.clock = ManualClock(start)
        self.executor = SimulatedExecutor(Outcome(after=None))
        self.store = Store(f"sqlite:///{tmp_path / 'astra.db'}")
        self.engine = Engine(self.store, load_inventory(inventory), self.executor, self.clock.now())
        self.app = create_app(self.engine, TOKEN, self.clock, audit_keep=audit_keep)

    def restart(self) -> None:
        """A new engine and app over the same database, as after a server restart."""
        self.store.close()
        self.store = Store(f"sqlite:///{self.tmp_path / 'astra.db'}")
        self.engine = Engine(self.store, load_inventory(self.inventory), self.executor, self.clock.now())
        self.app = create_app(self.engine, TOKEN, self.clock, audit_keep=self.audit_keep)

    def call(self, method: str, path: str, token: str | None = TOKEN, **kw) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}

        async def go():
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://astra.test") as c:
                return await c.request(method, path, headers=headers, **kw)

        return asyncio.run(go())

    def step(self, seconds: float = 0.0) -> None:
        self.clock.advance(seconds)
        self.engine.step(self.clock.now())

    def scrape(self, token: str = TOKEN) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        r = self.call("GET", "/metrics", token)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("text/plain")
        out = {}
        for family in text_string_to_metric_families(r.text):
            for s in family.samples:
                out[s.name, tuple(sorted(s.labels.items()))] = s.value
        return out
