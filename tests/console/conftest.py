"""Fixtures for the console's tests: the control plane's app (API and console) over a ``Plane``,
driven through Starlette's test client, which keeps cookies as a browser does."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from reconciler.controlplane.api import create_app
from tests.controlplane_api.conftest import TOKEN, Plane

RUNS = "/o/default/w/default/jobs/default"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


class Console:
    """A browser's view (cookies kept) of the app over ``plane``; ``api`` calls carry the token."""

    def __init__(self, plane: Plane) -> None:
        self.plane = plane
        self.http = TestClient(create_app(plane.engine, TOKEN, plane.clock), follow_redirects=False)

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
