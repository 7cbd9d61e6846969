"""Secrets over the API (``/secrets``): set, list, read, delete; roles; a run that waits for one.

Through httpx's ASGI transport, on a plane with no sandbox (the sandbox and the canary run on a
live server: ``test_secrets_live.py``). The plane's store seals with ``HOME/secrets.key``.
"""

from __future__ import annotations

import sqlite3

from .conftest import LONG, TOKEN, Client
from .test_api import tiny
from .test_teams import make_token, ws

CANARY = b"hf_canary_3f9a\nsecond line \x00\xff\xfe end"


def with_secret(name: str, secret: str, command: str = 'echo "$HF_TOKEN"') -> dict:
    doc = tiny(name, command=command)
    doc["spec"]["task_template"]["env"] = {"HF_TOKEN": {"secret": secret}, "PLAIN": "x"}
    return doc


def test_set_list_read_and_delete_a_secret_of_any_bytes_never_answering_its_value(client):
    r = client.put(f"{LONG}/secrets/hf-token", content=CANARY)
    assert r.status_code == 201
    body = r.json()
    assert {k: body[k] for k in ("name", "workspace", "size", "set_by", "used_by")} == {
        "name": "hf-token",
        "workspace": "default",
        "size": len(CANARY),
        "set_by": "server",
        "used_by": [],
    }
    assert client.get("/api/secrets/hf-token").json() == body
    assert [s["name"] for s in client.get("/api/secrets").json()["items"]] == ["hf-token"]
    again = client.put("/api/secrets/hf-token", content=b"other")
    assert (again.status_code, again.json()["size"]) == (200, 5)
    assert client.plane.store.secret_value("hf-token", "default/default") == b"other"
    assert client.delete("/api/secrets/hf-token").status_code == 200
    gone = client.get("/api/secrets/hf-token")
    assert (gone.status_code, gone.json()) == (
        404,
        {"detail": "secret 'hf-token' does not exist in workspace default"},
    )


def test_the_limits_are_said_in_words(client):
    assert client.put("/api/secrets/big", content=b"x" * 65536).status_code == 201
    r = client.put("/api/secrets/bigger", content=b"x" * 65537)
    assert (r.status_code, r.json()) == (
        422,
        [{"path": "", "message": "a secret's value is at most 65536 bytes (64 KiB); this one is 65537"}],
    )
    r = client.put("/api/secrets/empty", content=b"")
    assert r.json() == [{"path": "", "message": "a secret's value is empty: give at least one byte"}]
    r = client.put("/api/secrets/Not%20A%20Name", content=b"v")
    assert r.status_code == 422
    assert r.json()[0]["message"].startswith("a secret's name is letters, digits, '-', '_' and '.'")


def test_a_read_token_lists_but_cannot_set_and_another_workspace_s_secret_is_a_404(client):
    reader = make_token(client, "a-read", "read", "team-a")
    writer = make_token(client, "b-write", "write", "team-b")
    assert client.put(f"{ws('team-a')}/secrets/k", content=b"a-value", token=TOKEN).status_code == 201
    refused = client.put(f"{ws('team-a')}/secrets/k", content=b"mine", token=reader)
    assert refused.status_code == 403
    assert [s["name"] for s in client.get(f"{ws('team-a')}/secrets", token=reader).json()["items"]] == ["k"]
    other = client.get(f"{ws('team-b')}/secrets/k", token=writer)
    assert (other.status_code, other.json()) == (
        404,
        {"detail": "secret 'k' does not exist in workspace team-b"},
    )
    assert client.delete(f"{ws('team-b')}/secrets/k", token=writer).status_code == 404
    assert client.plane.store.secret_value("k", "default/team-a") == b"a-value"


def test_the_audit_trail_names_each_set_and_delete_and_who_never_the_value(client):
    client.put("/api/secrets/hf-token", content=CANARY)
    client.put("/api/secrets/hf-token", content=CANARY + b"2")
    client.delete("/api/secrets/hf-token")
    events = [e for e in client.get("/api/events").json()["items"] if e["kind"] == "secret"]
    assert [(e["action"], e["name"], e["token"], e["detail"]) for e in events] == [
        ("create", "hf-token", "server", {}),
        ("update", "hf-token", "server", {}),
        ("delete", "hf-token", "server", {}),
    ]


def test_the_database_holds_no_value_in_the_clear(client, plane):
    client.put("/api/secrets/hf-token", content=CANARY)
    plane.store.close()
    raw = b"".join(p.read_bytes() for p in plane.home.glob("astra.db*"))
    assert b"hf_canary_3f9a" not in raw
    with sqlite3.connect(plane.home / "astra.db") as db:
        (sealed,) = db.execute("SELECT sealed FROM secrets").fetchone()
    assert CANARY not in sealed and len(sealed) == len(CANARY) + 12 + 16  # nonce, GCM tag


def test_a_run_waits_for_a_secret_not_set_yet_and_starts_once_it_is(client, plane):
    r = client.post("/api/runs", json=with_secret("sec", "hf-token"))
    assert r.status_code == 201
    plane.step()
    status = client.get("/api/runs/sec").json()["status"]
    assert (status["state"], status["reason"]) == (
        "Pending",
        "Secret 'hf-token' does not exist in workspace default: astra secret set hf-token",
    )
    assert client.get("/api/runs/sec").status_code == 200
    client.put("/api/secrets/hf-token", content=b"hf_value_1")
    plane.settle_run("sec")
    assert plane.run("sec").state == "Completed"
    worker = client.get("/api/runs/sec/workers").json()["items"][0]["name"]
    assert client.get(f"/api/workers/{worker}/logs").text == "***\n"


def test_a_secret_a_run_reads_is_refused_deletion_unless_forced_and_the_run_waits_again(client, plane):
    client.put("/api/secrets/hf-token", content=b"v1")
    assert client.post("/api/runs", json=with_secret("waits", "hf-token", "sleep 30")).status_code == 201
    assert client.get("/api/secrets/hf-token").json()["used_by"] == ["waits"]
    r = client.delete("/api/secrets/hf-token")
    assert (r.status_code, r.json()) == (
        409,
        {"detail": "secret 'hf-token' is in use by run waits: delete them first, or give --force"},
    )
    assert client.post("/api/runs", json=with_secret("later", "gone-soon")).status_code == 201
    client.put("/api/secrets/gone-soon", content=b"v")
    assert client.delete("/api/secrets/gone-soon?force=true").status_code == 200
    plane.step()
    later = client.get("/api/runs/later").json()["status"]
    assert (
        later["reason"]
        == "Secret 'gone-soon' does not exist in workspace default: astra secret set gone-soon"
    )


def test_a_secret_changed_stops_nothing_and_the_next_worker_reads_the_new_value(client, plane):
    client.put("/api/secrets/hf-token", content=b"first")
    client.post("/api/runs", json=with_secret("one", "hf-token", 'echo "[$HF_TOKEN]"'))
    plane.settle_run("one")
    client.put("/api/secrets/hf-token", content=b"second")
    client.post("/api/runs", json=with_secret("two", "hf-token", 'printf "%s" "$HF_TOKEN" | wc -c'))
    plane.settle_run("two")
    log = client.get("/api/workers/two-0/logs").text
    assert log.strip() == "6"  # the new value's length: it reached the worker


def test_the_key_rotated_while_runs_use_secrets_and_the_server_restarted(client, plane):
    client.put("/api/secrets/hf-token", content=CANARY)
    client.post("/api/runs", json=with_secret("waiting", "not-yet"))
    before = (plane.home / "secrets.key").read_text()
    r = client.post("/api/secrets:rotate-key")
    assert r.status_code == 200 and r.json()["secrets"] == 1
    assert (plane.home / "secrets.key").read_text() != before
    assert (plane.home / "secrets.key").stat().st_mode & 0o777 == 0o600
    assert not (plane.home / "secrets.key.next").exists()
    again = plane.restart()
    try:
        assert again.store.secret_value("hf-token", "default/default") == CANARY
        c = Client(again)
        c.put("/api/secrets/not-yet", content=b"hf_canary_3f9a")
        again.settle_run("waiting")
        assert again.run("waiting").state == "Completed"
        assert c.get("/api/workers/waiting-0/logs").text == "***\n"
    finally:
        again.close()


def test_only_the_server_s_token_rotates_the_key(client):
    admin = make_token(client, "org-admin", "admin", None)
    r = client.post("/api/secrets:rotate-key", token=admin)
    assert r.status_code == 403


def test_a_worker_without_a_sandbox_cannot_have_secret_files_and_says_so(client, plane):
    client.put("/api/secrets/ssh-key", content=b"k")
    doc = tiny("files")
    doc["spec"]["task_template"]["secret_files"] = [{"name": "ssh-key", "mount_path": "/run/key"}]
    client.post("/api/runs", json=doc)
    plane.settle_run("files")
    worker = client.get("/api/runs/files/workers").json()["items"][0]
    assert worker["reason"] == "Secret files need a sandbox: install bubblewrap (exit code 126)"


def test_an_env_secret_with_a_nul_byte_ends_the_worker_in_words_never_its_value(client, plane):
    client.put("/api/secrets/binary", content=b"ab\x00cd_canary")
    client.post("/api/runs", json=with_secret("nul", "binary"))
    plane.settle_run("nul")
    worker = client.get("/api/runs/nul/workers").json()["items"][0]
    assert worker["reason"] == (
        "secret 'binary' holds a NUL byte, which an environment variable cannot: give it as a "
        "secret file (secret_files) (exit code 126)"
    )
    assert "canary" not in client.get("/api/workers/nul-0/logs").text
