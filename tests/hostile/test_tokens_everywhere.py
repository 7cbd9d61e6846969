"""A revoked token is revoked everywhere; the login form takes no other site's post; the webhook
and ``astra console`` tell a stranger nothing and a team everything it needs (issue 28: 4, 5, 10).

Against one live ``astra server``, as an attacker (or a team) would reach it: a browser's
cookies (an httpx client that keeps them), the CLI in a process of its own, curl-like calls.

* After ``astra token revoke``, the console session made with that token no longer loads a page
  or deletes a run, and a one-time link it made before no longer logs in.
* A login posted from another site (its ``Origin``, or ``Sec-Fetch-Site: cross-site``) is
  refused in words and opens no session; the server's own login page still logs in.
* ``POST /sources/x/hook`` without a valid signature answers the same for a workspace that
  exists and one that does not; ``astra console`` works with a workspace's token (its
  ``$WS_API`` as the server, or the server's root) and says a refusal in one line.
"""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from tests.controlplane_api.conftest import TOKEN, LiveServer
from tests.controlplane_api.test_api import tiny

WS = "/api/v1/orgs/default/workspaces/{}/clusters/default/api"
RUNS = "/o/default/w/{}/jobs/default"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokens")
    (root / "work").mkdir()
    live = LiveServer(root / "home", root / "work").start()
    yield live
    live.stop()


def make_token(server: LiveServer, name: str, workspace: str, role: str = "write") -> str:
    made = server.astra("token", "create", name, "--workspace", workspace, "--role", role)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def browser(server: LiveServer) -> httpx.Client:
    """A browser's cookies, on the server's own pages (same origin: what its login page posts)."""
    return httpx.Client(base_url=server.url, timeout=30)


def logged_in(server: LiveServer, token: str, workspace: str) -> httpx.Client:
    b = browser(server)
    signed = b.post("/login", data={"token": token, "next": RUNS.format(workspace)})
    assert signed.status_code == 303 and "astra_session" in b.cookies, signed.text
    return b


def as_team(server: LiveServer, token: str, *args: str, url: str | None = None):
    env = {**server.env, "ASTRA_TOKEN": token, "ASTRA_SERVER": url or server.url}
    command = [sys.executable, "-m", "reconciler.cli", *args]
    return subprocess.run(command, cwd=server.cwd, env=env, capture_output=True, text=True, timeout=120)


def test_a_revoked_token_ends_its_console_sessions_and_its_unused_links(server):
    token = make_token(server, "a-leaked", "team-a")
    base = WS.format("team-a")
    bearer = {"Authorization": f"Bearer {token}"}
    created = httpx.post(server.url + base + "/runs", json=tiny("precious"), headers=bearer, timeout=30)
    assert created.status_code == 201, created.text
    b = logged_in(server, token, "team-a")
    page = b.get(RUNS.format("team-a"))
    assert page.status_code == 200 and "precious" in page.text
    csrf = page.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    link = httpx.post(server.url + "/console/links", headers=bearer, timeout=30).json()["path"]

    revoked = server.astra("token", "revoke", "a-leaked")
    assert (revoked.returncode, revoked.stdout.strip()) == (0, "token a-leaked revoked")

    again = b.get(RUNS.format("team-a"))
    assert again.status_code == 303 and again.headers["location"].startswith("/login?next=")
    deleted = b.post(RUNS.format("team-a") + "/precious/delete", data={"csrf": csrf})
    assert deleted.status_code == 303 and deleted.headers["location"].startswith("/login?next=")
    kept = server.api("GET", base.removeprefix("/api") + "/runs/precious")
    assert kept.status_code == 200, "the revoked token's session deleted a run"

    fresh = browser(server)
    used = fresh.get(link)
    assert used.status_code == 401 and "astra_session" not in fresh.cookies
    assert "That link was used already, or is too old." in used.text


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
        {"Sec-Fetch-Site": "same-site"},
    ],
    ids=["origin", "opaque-origin", "fetch-metadata", "same-site"],
)
def test_a_login_posted_from_another_site_is_refused(server, headers):
    attacker = make_token(server, f"atk-{len(headers)}-{abs(hash(str(headers))) % 1000}", "team-b")
    visitor = browser(server)
    refused = visitor.post("/login", data={"token": attacker, "next": "/"}, headers=headers)
    assert refused.status_code == 403
    assert "This form was sent from another site" in refused.text
    assert "astra_session" not in visitor.cookies


def test_the_login_page_of_the_server_itself_still_logs_in(server):
    own = {"Origin": server.url, "Sec-Fetch-Site": "same-origin"}
    b = browser(server)
    signed = b.post("/login", data={"token": TOKEN, "next": "/"}, headers=own)
    assert signed.status_code == 303 and "astra_session" in b.cookies
    origin_only = browser(server)
    signed = origin_only.post("/login", data={"token": TOKEN, "next": "/"}, headers={"Origin": server.url})
    assert signed.status_code == 303 and "astra_session" in origin_only.cookies


def test_an_unsigned_hook_tells_no_one_which_workspaces_exist(server):
    make_token(server, "hook-team", "hooked")
    set_secret = server.api(
        "PUT",
        WS.format("hooked").removeprefix("/api") + "/sources/x/hook",
        json={"secret": "a-secret-of-sixteen"},
    )
    assert set_secret.status_code == 204, set_secret.text
    answers = set()
    for workspace in ("hooked", "nows", "default"):
        for headers in ({}, {"X-Hub-Signature-256": "sha256=00"}, {"X-Gitlab-Token": "guess"}):
            r = httpx.post(server.url + WS.format(workspace) + "/sources/x/hook", headers=headers, timeout=30)
            answers.add((r.status_code, r.text))
    wrong_cluster = httpx.post(
        server.url + "/api/v1/orgs/default/workspaces/hooked/clusters/nope/api/sources/x/hook", timeout=30
    )
    answers.add((wrong_cluster.status_code, wrong_cluster.text))
    assert len(answers) == 1, answers
    status, text = answers.pop()
    assert status == 401
    assert "not signed with source x's webhook secret" in text
    assert "nows" not in text and "workspace" not in text


def test_astra_console_works_with_a_workspace_token_and_says_a_refusal_in_one_line(server):
    token = make_token(server, "a-console", "team-c")
    by_ws_api = as_team(server, token, "console", "--no-browser", url=server.url + WS.format("team-c"))
    assert by_ws_api.returncode == 0, by_ws_api.stderr
    link = by_ws_api.stdout.strip()
    assert link.startswith(server.url + "/login/once/") and link.endswith(
        "?next=/o/default/w/team-c/jobs/default"
    )

    b = browser(server)
    opened = b.get(link)
    assert opened.status_code == 303 and opened.headers["location"] == RUNS.format("team-c")
    assert b.get(RUNS.format("team-c")).status_code == 200

    by_root = as_team(server, token, "console", "train", "--no-browser")
    assert by_root.returncode == 0, by_root.stderr
    assert by_root.stdout.strip().endswith("?next=/o/default/w/team-c/jobs/default/train")

    refused = as_team(server, "not-a-token", "console", "--no-browser")
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [
        f"astra: error: cannot open the console of {server.url}: "
        "401 an unknown (or revoked) token: send 'Authorization: Bearer TOKEN'"
    ]
