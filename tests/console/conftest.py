"""Fixtures for the console's tests: the control plane's app (API and console) over a ``Plane``,
called through httpx's ASGI transport by a client that keeps cookies as a browser does."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest

from reconciler.controlplane.api import create_app
from tests.controlplane_api.conftest import TOKEN, Plane

RUNS = "/o/default/w/default/jobs/default"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


class Browserish:
    """Synchronous calls into an ASGI app (each on its own event loop, as the API's tests make
    them), its cookies kept from one to the next; redirects are not followed."""

    def __init__(self, app) -> None:
        self.app = app
        self.cookies = httpx.Cookies()

    def request(self, method: str, path: str, **kw) -> httpx.Response:
        async def go() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://testserver", cookies=self.cookies
            ) as c:
                answer = await c.request(method, path, **kw)
                self.cookies = c.cookies
                return answer

        return asyncio.run(go())

    def get(self, path: str, **kw) -> httpx.Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw) -> httpx.Response:
        return self.request("POST", path, **kw)

    def close(self) -> None:
        self.cookies.clear()


class Console:
    """A browser's view (cookies kept) of the app over ``plane``; ``api`` calls carry the token."""

    def __init__(self, plane: Plane) -> None:
        self.plane = plane
        self.http = Browserish(create_app(plane.engine, TOKEN, plane.clock))

    def api(self, method: str, path: str, **kw):
        return self.http.request(method, "/api" + path, headers=BEARER, **kw)

    def login(self) -> None:
        answer = self.http.post("/login", data={"token": TOKEN, "next": RUNS})
        assert answer.status_code == 303, answer.text

    def csrf(self, path: str = RUNS) -> str:
        page = self.http.get(path)
        assert page.status_code == 200, page.text
        found = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert found, "no CSRF token on the page"
        return found.group(1)


@pytest.fixture
def plane(tmp_path):
    p = Plane(tmp_path)
    yield p
    p.close()


@pytest.fixture
def console(plane):
    c = Console(plane)
    yield c
    c.http.close()
