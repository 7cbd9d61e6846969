"""``/alerts`` and a source's suspend per workspace, with roles: a workspace's ``read`` token
lists its alerts and their history, a ``write`` token makes, tests and deletes them and suspends
a source, no token reaches another workspace's; and an alert is told only of its own
workspace's events (a source stalled in another workspace, by the same name, is not told)."""

from __future__ import annotations

import random

import pytest

from reconciler.controlplane.alerts import Delivery
from tests.controlplane_api.conftest import TOKEN
from tests.controlplane_api.test_teams import make_token, ws

SINK = {"sink": {"kind": "slack", "url": "chat-url"}}

#: (method, path under a workspace's base path, body, the role it needs, its answer when allowed)
CALLS = {
    "list": ("GET", "/alerts", None, "read", 200),
    "history": ("GET", "/alerts:history", None, "read", 200),
    "create": ("PUT", "/alerts/new-one", SINK, "write", 201),
    "test": ("POST", "/alerts/chat/test", None, "write", 202),
    "delete": ("DELETE", "/alerts/chat", None, "write", 204),
    "suspend": ("PUT", "/sources/repo/suspend", {"by": "ada", "reason": "why"}, "write", 200),
    "resume": ("DELETE", "/sources/repo/suspend", None, "write", 200),
}
ROLES = ("read", "write", "admin")


@pytest.fixture
def teams(client):
    tokens = {role: make_token(client, f"a-{role}", role, "team-a") for role in ROLES}
    make_token(client, "b-write", "write", "team-b")  # team-b is made with its first token
    for team in ("team-a", "team-b"):
        assert client.put(f"{ws(team)}/alerts/chat", json=SINK, token=TOKEN).status_code == 201
        assert client.put(f"{ws(team)}/sources/repo", json={"status": {}}, token=TOKEN).status_code == 200
    return tokens


@pytest.mark.parametrize("own", [True, False], ids=["own", "other"])
@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("role", ROLES)
def test_each_role_against_each_alerts_call_in_its_own_and_another_workspace(client, teams, role, call, own):
    method, path, body, needs, ok = CALLS[call]
    r = client.request(
        method,
        ws("team-a" if own else "team-b") + path,
        token=teams[role],
        **({"json": body} if body else {}),
    )
    allowed = own and ROLES.index(role) >= ROLES.index(needs)
    assert r.status_code == (ok if allowed else 403), r.text


def test_an_alert_is_told_only_of_its_own_workspaces_events(client, teams, receiver):
    delivery = Delivery(
        client.plane.store, lambda ws, n: receiver.url.encode(), clock=lambda: 1e6, rng=random.Random(1)
    )
    client.app.state.alerts = delivery
    alert = {**SINK, "events": ["source.load_failed"]}
    for team in ("team-a", "team-b"):
        assert client.put(f"{ws(team)}/alerts/chat", json=alert, token=TOKEN).status_code == 200
    for team in ("team-b", "team-a"):
        status = {"state": "Stalled", "reason": "LoadFailed", "message": f"broken in {team}"}
        body = {**status, "revision": "main@sha1:" + "a" * 40}  # what a watch pass writes
        assert client.put(f"{ws(team)}/sources/repo/status", json=body, token=TOKEN).status_code == 200
    delivery.step()
    for team in ("team-a", "team-b"):  # each workspace's alert chat: its own source's event only
        (told,) = client.get(f"{ws(team)}/alerts:history", token=TOKEN).json()["items"]
        assert told["state"] == "sent" and f"broken in {team}" in told["event"]["text"]
    assert len(receiver.got) == 2
