"""Teams on one cluster over the API (issue 17): scoped tokens, each workspace's own runs and
sources, quotas and usage, the audit trail.

The server's token (``TOKEN``) is the admin of org ``default``; the tokens here are made with it,
through the API, as an admin would."""

from __future__ import annotations

import pytest

from .conftest import TOKEN
from .test_api import tiny

ORG = "/api/v1/orgs/default/workspaces"


def ws(workspace: str) -> str:
    """The base path of a workspace's view of the default cluster."""
    return f"{ORG}/{workspace}/clusters/default/api"


def make_token(client, name: str, role: str, workspace: str | None) -> str:
    body = {"name": name, "role": role, **({"workspace": workspace} if workspace else {})}
    r = client.post("/api/tokens", json=body, token=TOKEN)
    assert r.status_code == 201, r.text
    return r.json()["token"]


@pytest.fixture
def teams(client, plane):
    """Workspaces team-a and team-b, a read, write and admin token of team-a, a run, a source and
    a drive (``data``, made by the server under its home) in each."""
    client.app.state.drives_root = plane.home / "drives"
    tokens = {role: make_token(client, f"a-{role}", role, "team-a") for role in ("read", "write", "admin")}
    make_token(client, "b-write", "write", "team-b")
    for team in ("team-a", "team-b"):
        assert client.post(f"{ws(team)}/runs", json=tiny("train"), token=TOKEN).status_code == 201
        source = {"status": {"state": "ok"}}
        assert client.put(f"{ws(team)}/sources/repo", json=source, token=TOKEN).status_code == 200
        assert client.post(f"{ws(team)}/drives", json={"name": "data"}, token=TOKEN).status_code == 201
    return tokens


#: (method, path under a base path, body) of each kind of call.
CALLS = {
    "list runs": ("GET", "/runs", None),
    "get run": ("GET", "/runs/train", None),
    "run events": ("GET", "/runs/train/events", None),
    "list workers": ("GET", "/workers", None),
    "list sources": ("GET", "/sources", None),
    "get source": ("GET", "/sources/repo", None),
    "audit events": ("GET", "/events", None),
    "workspaces": ("GET", "/workspaces", None),
    "create run": ("POST", "/runs", tiny("fresh")),
    "delete run": ("DELETE", "/runs/train", None),
    "put source": ("PUT", "/sources/repo", {"resource_version": 1, "status": {"state": "done"}}),
    "list tokens": ("GET", "/tokens", None),
    "create token": ("POST", "/tokens", {"name": "new-one", "role": "read"}),
    "list drives": ("GET", "/drives", None),
    "get drive": ("GET", "/drives/data", None),
    "create drive": ("POST", "/drives", {"name": "scratch"}),
    "delete drive": ("DELETE", "/drives/data", None),
}
READS = {"list runs", "get run", "run events", "list workers", "list sources", "get source"}
READS |= {"audit events", "workspaces", "list drives", "get drive"}
WRITES = {"create run", "delete run", "put source", "create drive", "delete drive"}
ADMIN = {"list tokens", "create token"}
OK = {"GET": 200, "POST": 201, "DELETE": 200, "PUT": 200}


def expected(role: str, call: str, own: bool) -> int:
    if not own:
        return 403
    needs = "read" if call in READS else "write" if call in WRITES else "admin"
    allowed = ("read", "write", "admin").index(role) >= ("read", "write", "admin").index(needs)
    return OK[CALLS[call][0]] if allowed else 403


@pytest.mark.parametrize("own", [True, False], ids=["own", "other"])
@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("role", ["read", "write", "admin"])
def test_each_role_against_each_endpoint_in_its_own_and_another_workspace(client, teams, role, call, own):
    method, path, body = CALLS[call]
    base = ws("team-a" if own else "team-b")
    r = client.request(method, base + path, token=teams[role], **({"json": body} if body else {}))
    assert r.status_code == expected(role, call, own), r.text
    if r.status_code == 403:  # the refusal names the scope the token holds
        assert f"holds {role} in workspace team-a of org default" in r.json()["detail"]


def test_a_workspace_token_is_refused_the_default_workspace_at_api(client, teams):
    r = client.get("/api/runs", token=teams["admin"])
    assert r.status_code == 403
    assert r.json()["detail"] == (
        "this token (a-admin) holds admin in workspace team-a of org default, "
        "not workspace default of org default"
    )


def test_each_workspace_sees_its_own_runs_sources_and_workers_by_the_same_names(client, teams):
    mine = client.get(f"{ws('team-a')}/runs", token=teams["read"]).json()["items"]
    assert [r["metadata"]["name"] for r in mine] == ["train"]
    assert mine[0]["status"]["workspace"] == "team-a"
    assert mine[0]["status"]["url"].endswith(f"{ws('team-a')}/runs/train")
    # the default workspace (/api alone) has none of theirs; team-b's train is its own
    assert client.get("/api/runs").json()["items"] == []
    assert client.delete(f"{ws('team-a')}/runs/train", token=teams["write"]).status_code == 200
    assert client.get(f"{ws('team-b')}/runs/train", token=TOKEN).status_code == 200
    assert [s["name"] for s in client.get(f"{ws('team-b')}/sources", token=TOKEN).json()["items"]] == ["repo"]
    assert client.get("/api/sources").json()["items"] == []
    workers = client.get(f"{ws('team-b')}/workers", token=TOKEN).json()["items"]
    assert {w["name"] for w in workers} == {"train-0"} and {w["run"] for w in workers} == {"train"}


def test_names_are_unique_within_a_workspace_only(client, teams):
    r = client.post(f"{ws('team-a')}/runs", json=tiny("train"), token=teams["write"])
    assert (r.status_code, r.json()) == (409, {"detail": "a run named train exists"})
    assert client.post("/api/runs", json=tiny("train")).status_code == 201


def test_a_token_is_shown_once_listed_by_name_and_revoked_at_once(client, teams):
    listed = client.get("/api/tokens").json()["items"]
    assert [t["name"] for t in listed] == ["a-admin", "a-read", "a-write", "b-write"]
    assert all("token" not in t and "hash" not in t for t in listed)
    assert client.get(f"{ws('team-a')}/runs", token=teams["read"]).status_code == 200
    r = client.delete("/api/tokens/a-read")
    assert (r.status_code, r.json()["name"], r.json()["role"]) == (200, "a-read", "read")
    r = client.get(f"{ws('team-a')}/runs", token=teams["read"])
    assert r.status_code == 401
    assert "unknown (or revoked) token" in r.json()["detail"]
    assert client.delete("/api/tokens/a-read").status_code == 404


def test_tokens_are_kept_only_as_digests_and_survive_a_restart(client, teams, plane):
    import sqlite3

    db = sqlite3.connect(plane.home / "astra.db")
    kept = [row for row in db.execute("SELECT * FROM tokens")]
    db.close()
    assert kept and not any(text in map(str, row) for row in kept for text in teams.values())
    from reconciler.controlplane.api import create_app

    again = create_app(plane.engine, TOKEN, plane.clock)
    client.app = again
    assert client.get(f"{ws('team-a')}/runs", token=teams["write"]).status_code == 200


def test_a_workspace_admin_manages_its_own_workspace_s_tokens_only(client, teams):
    admin = teams["admin"]
    r = client.post(f"{ws('team-a')}/tokens", json={"name": "a-ci", "role": "write"}, token=admin)
    assert (r.status_code, r.json()["workspace"]) == (201, "team-a")
    assert [t["name"] for t in client.get(f"{ws('team-a')}/tokens", token=admin).json()["items"]] == [
        "a-admin",
        "a-ci",
        "a-read",
        "a-write",
    ]
    r = client.post(
        f"{ws('team-a')}/tokens", json={"name": "x", "role": "read", "workspace": "team-b"}, token=admin
    )
    assert r.status_code == 403 and "holds admin in workspace team-a" in r.json()["detail"]
    assert client.delete(f"{ws('team-a')}/tokens/b-write", token=admin).status_code == 404
    r = client.put(f"{ws('team-a')}/workspaces/team-a/quota", json={"gpus": 100}, token=admin)
    assert r.status_code == 403 and "needs the org's admin" in r.json()["detail"]


def test_an_org_wide_token_reaches_every_workspace_of_its_org(client, teams):
    org_reader = make_token(client, "auditor", "read", "*")
    for team in ("team-a", "team-b", "default"):
        assert client.get(f"{ws(team)}/runs", token=org_reader).status_code == 200
    assert client.post(f"{ws('team-a')}/runs", json=tiny("x"), token=org_reader).status_code == 403


def test_a_workspace_that_does_not_exist_is_403_naming_how_it_is_made(client):
    r = client.get(f"{ws('nobody')}/runs")
    assert r.status_code == 403
    assert r.json()["detail"].startswith("no workspace nobody in org default")


def test_quota_and_usage_in_the_workspace(client, plane, teams):
    gpu = tiny("big")
    gpu["spec"]["task_template"]["requested_resources"] = {"gpu_requests": {"count": 8}}
    r = client.put("/api/workspaces/team-a/quota", json={"gpus": 8, "runs": 3})
    assert r.status_code == 200
    r = client.post(f"{ws('team-a')}/runs", json=gpu, token=teams["write"])
    assert r.status_code == 201, r.text
    gpu["metadata"]["name"] = "big-2"
    assert client.post(f"{ws('team-a')}/runs", json=gpu, token=teams["write"]).status_code == 201
    plane.engine.step(plane.clock.now())
    got = client.get(f"{ws('team-a')}/workspaces/team-a", token=teams["read"]).json()
    assert got["quota"] == {"gpus": 8, "runs": 3}
    assert got["usage"]["gpus"] == 8 and got["usage"]["pending"] >= 1
    waiting = client.get(f"{ws('team-a')}/runs/big-2", token=teams["read"]).json()["status"]
    assert (waiting["state"], waiting["reason"]) == ("Pending", "Workspace team-a is at its quota of 8 GPUs")
    listed = client.get("/api/workspaces").json()["items"]
    assert [w["name"] for w in listed] == ["default", "team-a", "team-b"]
    assert client.get(f"{ws('team-a')}/workspaces/team-b", token=teams["read"]).status_code == 403


def test_the_audit_trail_after_a_mixed_session(client, teams):
    write, admin = teams["write"], teams["admin"]
    base = ws("team-a")
    assert client.post(f"{base}/runs", json=tiny("job"), token=write).status_code == 201
    got = client.get(f"{base}/runs/job", token=write).json()
    run = {"metadata": got["metadata"], "spec": {**got["spec"], "priority": 5}}
    assert client.put(f"{base}/runs/job", json=run, token=write).status_code == 200
    assert client.delete(f"{base}/runs/job", token=write).status_code == 200
    assert (
        client.post(f"{base}/tokens", json={"name": "a-bot", "role": "read"}, token=admin).status_code == 201
    )
    assert client.delete(f"{base}/tokens/a-bot", token=admin).status_code == 200
    assert client.put("/api/workspaces/team-a/quota", json={"gpus": 4}).status_code == 200
    assert client.get(f"{base}/runs", token=write).status_code == 200  # reads are not recorded
    events = client.get(f"{base}/events", token=teams["read"]).json()["items"]
    session = [(e["token"], e["action"], e["kind"], e["name"]) for e in events]
    assert session[-6:] == [
        ("a-write", "create", "run", "job"),
        ("a-write", "update", "run", "job"),
        ("a-write", "delete", "run", "job"),
        ("a-admin", "create", "token", "a-bot"),
        ("a-admin", "revoke", "token", "a-bot"),
        ("server", "set", "quota", "team-a"),
    ]
    update = next(e for e in events if e["action"] == "update" and e["kind"] == "run")
    assert update["detail"]["changed"] == {"spec.priority": {"from": None, "to": 5}}
    assert all(e["workspace"] == "team-a" for e in events)
    only = client.get(f"{base}/events?run=job", token=teams["read"]).json()["items"]
    assert [e["action"] for e in only] == ["create", "update", "delete"]
    # team-b's trail holds none of it
    assert "job" not in {e["name"] for e in client.get(f"{ws('team-b')}/events", token=TOKEN).json()["items"]}


def test_the_audit_trail_keeps_the_newest_n_per_workspace(plane):
    from reconciler.controlplane.api import create_app

    from .conftest import Client

    client = Client(plane)
    client.app = create_app(plane.engine, TOKEN, plane.clock, audit_keep=3)
    for i in range(5):
        assert client.post("/api/runs", json=tiny(f"r{i}")).status_code == 201
    assert [e["name"] for e in client.get("/api/events").json()["items"]] == ["r2", "r3", "r4"]
    batch = {"runs": [tiny(f"b{i}") for i in range(4)]}  # one write of many runs, one commit
    assert client.post("/api/runs:batch", json=batch).json()["created"] == 4
    assert [e["name"] for e in client.get("/api/events").json()["items"]] == ["b1", "b2", "b3"]


def test_each_workspace_has_its_own_drives_by_the_same_names(client, plane, teams):
    write, base = teams["write"], ws("team-a")
    results = {"name": "results", "mount_path": "/results"}
    run = tiny("sweep")
    run["spec"]["task_template"]["datavolume_refs"] = [results]
    # the default workspace has a drive 'results' (the client fixture's): team-a has none, and
    # team-a's run waits for its own (the default workspace's is not its)
    r = client.post(f"{base}/runs", json=run, token=write)
    assert r.status_code == 201, r.text
    plane.step()
    waiting = client.get(f"{base}/runs/sweep", token=write).json()["status"]
    assert (waiting["state"], waiting["reason"]) == (
        "Pending",
        "Drive 'results' does not exist in workspace team-a: astra drive create results --path DIR",
    )
    assert client.delete(f"{base}/runs/sweep", token=write).status_code == 200
    made = client.post(f"{base}/drives", json={"name": "results"}, token=write)
    assert made.status_code == 201, made.text
    folder = plane.home / "drives" / "default.team-a" / "results"
    assert (made.json()["workspace"], made.json()["path"]) == ("team-a", str(folder))
    assert folder.is_dir()
    assert client.post(f"{base}/runs", json=run, token=write).status_code == 201
    mine = client.get(f"{base}/drives", token=teams["read"]).json()["items"]
    assert [(d["name"], d["used_by"]) for d in mine] == [("data", []), ("results", ["sweep"])]
    assert [d["name"] for d in client.get(f"{ws('team-b')}/drives", token=TOKEN).json()["items"]] == ["data"]
    default = {d["name"]: d for d in client.get("/api/drives").json()["items"]}
    assert default["results"]["used_by"] == [] and default["results"]["path"] != str(folder)
    refused = client.delete(f"{base}/drives/results", token=write)
    assert refused.status_code == 409 and "in use by run sweep" in refused.json()["detail"]
    assert client.delete(f"{base}/runs/sweep", token=write).status_code == 200
    assert client.delete(f"{base}/drives/results", token=write).status_code == 200
    r = client.get(f"{ws('team-b')}/drives/results", token=TOKEN)
    assert (r.status_code, r.json()) == (
        404,
        {"detail": "drive 'results' does not exist in workspace team-b"},
    )
    events = client.get(f"{base}/events", token=teams["read"]).json()["items"]
    drives = [(e["token"], e["action"], e["name"], e["detail"]) for e in events if e["kind"] == "drive"]
    assert drives == [
        ("server", "create", "data", {"path": str(folder.parent / "data")}),
        ("a-write", "create", "results", {"path": str(folder)}),
        ("a-write", "delete", "results", {"path": str(folder)}),
    ]


def test_only_the_org_s_admin_names_a_host_folder_for_a_drive(client, plane, teams, tmp_path):
    """A workspace's writer (or admin) with ``path`` could mount another workspace's drive folder
    or the server's home into its workers: only an admin of the whole org may name a folder."""
    base = ws("team-a")
    elsewhere = str(plane.home / "drives" / "default.team-b" / "data")  # team-b's own drive folder
    for role in ("write", "admin"):
        refused = client.post(f"{base}/drives", json={"name": "steal", "path": elsewhere}, token=teams[role])
        assert refused.status_code == 403, refused.text
        assert refused.json()["detail"] == (
            f"this token (a-{role}) holds {role} in workspace team-a of org default: a drive of a "
            "folder of the host's choosing (path) needs the org's admin"
        )
    assert [d["name"] for d in client.get(f"{base}/drives", token=TOKEN).json()["items"]] == ["data"]
    shared = tmp_path / "shared"
    shared.mkdir()
    made = client.post(f"{base}/drives", json={"name": "shared", "path": str(shared)}, token=TOKEN)
    assert made.status_code == 201 and made.json()["path"] == str(shared)
