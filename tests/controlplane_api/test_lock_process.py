"""A source's apply lock keeps the process that took it (host, pid, start: issue 12), so that a
client told "locked" can say whether the holder is gone; a lock asked for without them has them null."""

from __future__ import annotations

from reconciler.processes import Process
from reconciler.state import Lock, Locked

PROCESS = {"host": "runner-1", "pid": 4321, "started": "99/boot/ns"}


def test_the_lock_keeps_the_process_that_took_it(client):
    taken = client.post("/api/sources/s/lock", json={"owner": "ci@runner-1:4321", "id": "L1", **PROCESS})
    assert taken.status_code == 201
    assert {k: taken.json()[k] for k in ("id", "owner", *PROCESS)} == {
        "id": "L1",
        "owner": "ci@runner-1:4321",
        **PROCESS,
    }
    assert {k: client.get("/api/sources/s").json()["lock"][k] for k in PROCESS} == PROCESS
    refused = client.post("/api/sources/s/lock", json={"owner": "me@h:1", "id": "L2"})
    assert refused.status_code == 409
    assert Lock.from_json(refused.json()["lock"]) == Lock(
        "L1", "ci@runner-1:4321", taken.json()["created_at"], **PROCESS
    )


def test_a_lock_asked_for_without_its_process_has_it_null_and_cannot_be_judged(client):
    taken = client.post("/api/sources/s/lock", json={"owner": "me@h:1", "id": "L1"}).json()
    assert {k: taken[k] for k in PROCESS} == dict.fromkeys(PROCESS)
    assert not Locked("s", Lock.from_json(taken)).gone


def test_a_lock_of_a_gone_process_on_this_host_is_judged_gone(client):
    me = Process.this()
    assert me.started is not None
    ticks, _, clock = me.started.partition("/")
    gone = {"host": me.host, "pid": me.pid, "started": f"{int(ticks) - 1}/{clock}"}  # an earlier process
    client.post("/api/sources/s/lock", json={"owner": "ci@here:1", "id": "L1", **gone})
    held = client.post("/api/sources/s/lock", json={"owner": "me@h:1", "id": "L2"}).json()["lock"]
    assert Locked("s", Lock.from_json(held)).gone
