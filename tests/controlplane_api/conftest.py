"""Fixtures for the control plane's API, store and executor tests, and for a live ``astra server``.

Nothing here sleeps to wait: every wait polls a state with a bounded deadline.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from reconciler.controlplane.api import create_app
from reconciler.controlplane.clock import ManualClock
from reconciler.controlplane.engine import Engine
from reconciler.controlplane.executor import ProcessExecutor
from reconciler.controlplane.inventory import default_inventory
from reconciler.controlplane.store import SecretBox, Store

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "docs" / "seeds"
TOKEN = "test-token"
LONG = "/api/v1/orgs/default/workspaces/default/clusters/default/api"
DEADLINE = 60.0


def until(predicate, *, step=None, timeout: float = DEADLINE, what: str = "the condition"):
    """Poll ``predicate`` (calling ``step`` first each round) until it is true, or fail at the deadline."""
    end = time.monotonic() + timeout
    while True:
        if step is not None:
            step()
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")


class Plane:
    """An engine on a SQLite file, a process executor and a manual clock: the server minus HTTP."""

    def __init__(
        self, home: Path, host_env: dict[str, str] | None = None, *, grace: float | None = 2.0, inventory=None
    ) -> None:
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        self.clock = ManualClock(1_000_000.0)
        self.store = Store(f"sqlite:///{home / 'astra.db'}", SecretBox.at(home / "secrets.key"))
        self.executor = ProcessExecutor(home, cwd=home, grace=grace, host_env=host_env, secrets=self.secret)
        self.engine = Engine(self.store, inventory or default_inventory(), self.executor, self.clock.now())

    def step(self) -> None:
        self.engine.step(self.clock.now())

    def run(self, name: str):
        return self.engine.state.runs[name]

    def worker(self, name: str):
        return self.engine.state.workers[name]

    def settle_run(self, name: str, timeout: float = DEADLINE):
        return until(
            lambda: self.run(name).state in ("Completed", "Failed", "Cancelled"),
            step=self.step,
            timeout=timeout,
            what=f"run {name} to end",
        )

    def restart(self) -> Plane:
        """A new engine over the same database, as after a server restart."""
        self.executor.shutdown()
        self.store.close()
        again = Plane.__new__(Plane)
        again.home, again.clock = self.home, self.clock
        again.store = Store(f"sqlite:///{self.home / 'astra.db'}", SecretBox.at(self.home / "secrets.key"))
        again.executor = ProcessExecutor(self.home, cwd=self.home, grace=2.0, secrets=again.secret)
        again.engine = Engine(again.store, default_inventory(), again.executor, self.clock.now())
        return again

    def secret(self, workspace: str, name: str) -> bytes | None:
        """A secret's value, as the server gives its executors (the store's ``secret_value``)."""
        return self.store.secret_value(name, workspace)

    def close(self) -> None:
        self.executor.shutdown()
        self.store.close()


@pytest.fixture
def plane(tmp_path):
    p = Plane(tmp_path)
    yield p
    p.close()


class Client:
    """Synchronous calls into the ASGI app through httpx's ASGI transport."""

    def __init__(self, plane: Plane, token: str | None = TOKEN) -> None:
        self.plane = plane
        self.app = create_app(plane.engine, TOKEN, plane.clock)
        self.token = token

    def request(self, method: str, path: str, *, token: Any = "default", **kw) -> httpx.Response:
        token = self.token if token == "default" else token
        headers = dict(kw.pop("headers", {}))
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"

        async def go():
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://astra.test") as c:
                return await c.request(method, path, headers=headers, **kw)

        return asyncio.run(go())

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def put(self, path, **kw):
        return self.request("PUT", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)


#: The drives the seeds' sweep mounts: the workspace of the API's tests has them.
SEED_DRIVES = ("datasets", "results")


@pytest.fixture
def client(plane):
    for name in SEED_DRIVES:
        folder = plane.home / "drives" / name
        folder.mkdir(parents=True)
        plane.store.create_drive(name, str(folder), plane.clock.now())
    return Client(plane)


# ---- a live server -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """``astra server`` in a process of its own; ``args`` are added to its command line (an
    ``--inventory``), ``env`` to its environment (a ``PATH`` that holds nothing)."""

    def __init__(
        self, home: Path, cwd: Path, *, args: tuple[str, ...] = (), env: dict[str, str] | None = None
    ) -> None:
        self.home, self.cwd, self.args = home, cwd, args
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **{k: v for k, v in os.environ.items() if k not in ("ASTRA_SERVER", "ASTRA_TOKEN")},
            "ASTRA_HOME": str(home),
            "ASTRA_TOKEN": TOKEN,
            "ASTRA_SERVER": self.url,
            "PYTHONPATH": str(ROOT),
            **(env or {}),
        }
        self.proc: subprocess.Popen | None = None

    def start(self) -> LiveServer:
        self.home.mkdir(parents=True, exist_ok=True)
        log = open(self.home / "test-server.log", "ab")  # noqa: SIM115 - kept open while it runs
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "reconciler.cli",
                "server",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                *self.args,
            ],
            cwd=self.cwd,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            until(self._up, timeout=DEADLINE, what="the server to answer")
        except BaseException:  # a server that did not answer in time is not left running
            self.proc.kill()
            self.proc.wait(timeout=60)
            self.proc = None
            raise
        return self

    def _up(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError((self.home / "test-server.log").read_text())
        try:
            return httpx.get(self.url + "/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def api(self, method: str, path: str, **kw) -> httpx.Response:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        return httpx.request(method, self.url + "/api" + path, headers=headers, timeout=30, **kw)

    def astra(self, *args: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "reconciler.cli", *args],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            **kw,
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.astra("server", "stop")
            self.proc.wait(timeout=60)
        self.proc = None


@pytest.fixture
def live(tmp_path):
    cwd = tmp_path / "work"
    cwd.mkdir()
    server = LiveServer(tmp_path / "home", cwd).start()
    yield server
    server.stop()
