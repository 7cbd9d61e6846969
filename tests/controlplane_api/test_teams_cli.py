"""Two teams share one live ``astra server`` through the CLI (issue 17): ``astra token``,
``astra quota set``, ``astra get workspaces``, ``astra events``; each team with its own token
sees and touches only its own runs."""

from __future__ import annotations

import json

import pytest

from .conftest import LiveServer
from .test_api import tiny

WS = "/api/v1/orgs/default/workspaces/{}/clusters/default/api"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("teams")
    (root / "work").mkdir()
    live = LiveServer(root / "home", root / "work", args=("--audit-keep", "50")).start()
    yield live
    live.stop()


def as_team(server: LiveServer, token: str, workspace: str, *args: str):
    """``astra ARGS`` with a team's token, against its workspace's view of the cluster."""
    import subprocess
    import sys

    env = {**server.env, "ASTRA_TOKEN": token, "ASTRA_SERVER": server.url + WS.format(workspace)}
    command = [sys.executable, "-m", "reconciler.cli", *args]
    return subprocess.run(command, cwd=server.cwd, env=env, capture_output=True, text=True, timeout=120)


def test_two_teams_share_a_cluster_with_their_own_tokens_and_quotas(server):
    made = server.astra("token", "create", "a-ci", "--workspace", "team-a", "--role", "write")
    assert made.returncode == 0, made.stderr
    a_token = made.stdout.strip()
    assert "token a-ci (write in team-a): shown once" in made.stderr
    b_token = server.astra(
        "token", "create", "b-ci", "--workspace", "team-b", "--role", "write"
    ).stdout.strip()

    listed = server.astra("token", "list")
    assert listed.returncode == 0
    assert [line.split()[:3] for line in listed.stdout.splitlines()[1:]] == [
        ["a-ci", "team-a", "write"],
        ["b-ci", "team-b", "write"],
    ]
    assert a_token not in listed.stdout

    quota = server.astra("quota", "set", "team-a", "--gpus", "8", "--runs", "2")
    assert (quota.returncode, quota.stdout.strip()) == (0, "workspace team-a: quota 8 GPUs, 2 runs")

    doc = tiny("train", command="sleep 30")
    r = server.api("POST", WS.format("team-a").removeprefix("/api") + "/runs", json=doc)
    assert r.status_code == 201, r.text

    got = as_team(server, a_token, "team-a", "get", "workspaces", "-o", "json")
    assert got.returncode == 0, got.stderr
    assert [(w["name"], w["quota"]) for w in json.loads(got.stdout)] == [("team-a", {"gpus": 8, "runs": 2})]
    table = server.astra("get", "workspaces").stdout.splitlines()
    assert table[0].split() == ["NAME", "GPUS", "QUOTA", "GPUS", "RUNS", "QUOTA", "RUNS", "PENDING"]
    assert [line.split()[0] for line in table[1:]] == ["default", "team-a", "team-b"]

    # team-b cannot see team-a's workspace at all; its own trail is its own
    refused = as_team(server, b_token, "team-a", "events")
    assert refused.returncode == 1
    assert "holds write in workspace team-b of org default, not workspace team-a" in refused.stderr
    trail = server.astra("events", "-o", "json").stdout  # the default workspace's: no team's writes
    assert "a-ci" not in trail

    a_trail = as_team(server, a_token, "team-a", "events", "--since", "1h", "-o", "json")
    assert a_trail.returncode == 0, a_trail.stderr
    assert [(e["token"], e["action"], e["kind"], e["name"]) for e in json.loads(a_trail.stdout)] == [
        ("server", "create", "workspace", "team-a"),
        ("server", "create", "token", "a-ci"),
        ("server", "set", "quota", "team-a"),
        ("server", "create", "run", "train"),
    ]
    only = as_team(server, a_token, "team-a", "events", "--run", "train")
    assert len(only.stdout.splitlines()) == 2 and "create  run train" in only.stdout

    revoked = server.astra("token", "revoke", "a-ci")
    assert (revoked.returncode, revoked.stdout.strip()) == (0, "token a-ci revoked")
    after = as_team(server, a_token, "team-a", "events")
    assert after.returncode == 1 and "unknown (or revoked) token" in after.stderr
    assert server.api("DELETE", WS.format("team-a").removeprefix("/api") + "/runs/train").status_code == 200
