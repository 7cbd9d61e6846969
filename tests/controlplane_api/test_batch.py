"""``POST /runs:batch``: each document as ``POST /runs`` of it alone would answer, one transaction."""

from __future__ import annotations

import copy
import json

import pytest

from reconciler.runspec.normalize import digest, normalize
from reconciler.wire import BATCH_MAX, LOCK_HEADER

from .conftest import LONG
from .test_api import tiny
from .test_teams import teams, ws  # noqa: F401 (teams: a fixture)

BATCH = "/api/runs:batch"


def bad(name: str) -> dict:
    doc = tiny(name)
    doc["spec"]["task_template"]["restart_policy"] = "Sometimes"
    doc["spec"]["array"] = {"size": 0}
    return doc


def alone(client, doc: dict) -> tuple[int, object]:
    """What ``POST /runs`` of ``doc`` alone answers, on a copy of the server (the status and body)."""
    r = client.post("/api/runs", json=doc)
    return r.status_code, r.json()


def test_each_document_gets_what_post_runs_would_answer(client):
    client.post("/api/runs", json=tiny("taken"))
    docs = [tiny("a"), bad("b"), tiny("taken"), tiny("a"), {"metadata": {}}, tiny("c"), [1]]
    r = client.post(BATCH, json={"runs": docs})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [(i["name"], i["status"]) for i in body["items"]] == [
        ("a", 201),
        ("b", 422),
        ("taken", 409),
        ("a", 409),
        (None, 422),
        ("c", 201),
        (None, 422),
    ]
    assert body["created"] == 2
    # the refusals are POST /runs's, word for word
    for item, doc in zip(body["items"], docs, strict=True):
        if item["status"] == 422:
            status, single = alone(client, doc)
            assert (status, item["errors"]) == (422, single)
        if item["status"] == 409:
            status, single = alone(client, doc)
            assert (status, item["detail"]) == (409, single["detail"])
    # the runs created are runs like any other, with increasing versions
    a, c = client.get("/api/runs/a").json(), client.get("/api/runs/c").json()
    assert a["metadata"]["resource_version"] == body["items"][0]["resource_version"]
    assert c["metadata"]["resource_version"] == body["items"][5]["resource_version"]
    assert a["metadata"]["resource_version"] < c["metadata"]["resource_version"]
    names = [s["name"] for s in client.get("/api/runs", params={"view": "summary"}).json()["items"]]
    assert names == ["taken", "a", "c"]


def test_stop_on_error_creates_nothing_after_the_first_failure(client):
    docs = [tiny("a"), bad("b"), tiny("c")]
    body = client.post(BATCH, json={"runs": docs, "stop_on_error": True}).json()
    assert [i["status"] for i in body["items"]] == [201, 422, 424]
    assert (
        body["items"][2]["detail"] == "not attempted: document 1 of the batch was not created (stop_on_error)"
    )
    assert client.get("/api/runs/c").status_code == 404


def test_a_batch_over_the_limit_is_refused_whole_in_words(client):
    r = client.post(BATCH, json={"runs": [tiny(f"r{i}") for i in range(BATCH_MAX + 1)]})
    assert r.status_code == 422
    assert r.json() == [
        {
            "path": "runs",
            "message": f"a batch holds at most {BATCH_MAX} runs; this one holds {BATCH_MAX + 1}: "
            f"send them in batches of at most {BATCH_MAX}",
        }
    ]
    assert client.get("/api/runs").json()["items"] == []


@pytest.mark.parametrize(
    ("body", "path", "words"),
    [
        ({}, "runs", "is required"),
        ({"runs": {"a": 1}}, "runs", "must be a list"),
        ({"runs": [], "stop_on_error": "yes"}, "stop_on_error", "must be true or false"),
        ({"runs": [], "record": {"source": "s"}}, "record.applied_at", "is required"),
        ({"runs": [], "record": {"source": "s\x00", "applied_at": 1.0}}, "record.source", "NUL"),
    ],
)
def test_a_body_that_is_no_batch_is_a_422_naming_the_field(client, body, path, words):
    r = client.post(BATCH, json=body)
    assert r.status_code == 422
    [found] = r.json()
    assert found["path"] == path and words in found["message"], found


def test_the_body_limits_hold_for_a_batch(client):
    deep = {"runs": [tiny("a")]}
    node = deep["runs"][0]["metadata"]
    for _ in range(70):
        node["x"] = {}
        node = node["x"]
    r = client.post(BATCH, json=deep)
    assert r.status_code == 422 and "nests more than 64 levels" in r.json()[0]["message"]
    twice = b'{"runs": [], "runs": []}'
    r = client.post(BATCH, content=twice, headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()[0]["message"].startswith("duplicate key 'runs'")
    big = b'{"runs": ["' + b"x" * (16 * 1024 * 1024) + b'"]}'
    r = client.post(BATCH, content=big, headers={"Content-Type": "application/json"})
    assert r.status_code == 413


def test_recorded_runs_are_in_the_inventory_in_the_same_write_under_the_lock(client):
    lock = {"id": "L1", "owner": "me@h:1", "created_at": 1.0}
    assert client.post("/api/sources/repo/lock", json=lock).status_code in (200, 201)
    stamped = tiny("a")
    stamped["metadata"]["annotations"] = {"astra.revision": "sha256:x", "team": "vision"}
    record = {"source": "repo", "applied_at": 5.0, "files": {"a": "runs/a.yaml"}}
    # without the lock: 409, nothing created
    r = client.post(BATCH, json={"runs": [stamped, tiny("b")], "record": record})
    assert r.status_code == 409 and r.json()["lock"]["id"] == "L1"
    assert client.get("/api/runs").json()["items"] == []
    r = client.post(
        BATCH, json={"runs": [stamped, tiny("b"), bad("c")], "record": record}, headers={"X-Astra-Lock": "L1"}
    )
    assert [i["status"] for i in r.json()["items"]] == [201, 201, 422]
    inventory = client.get("/api/sources/repo/runs").json()["items"]
    assert sorted(inventory) == ["a", "b"]  # the refused one is not recorded
    kept = copy.deepcopy(stamped)
    kept["metadata"]["annotations"] = {"team": "vision"}  # astra's own annotations are not kept
    assert inventory["a"]["spec"] == kept and inventory["a"]["file"] == "runs/a.yaml"
    assert inventory["a"]["applied_at"] == 5.0 and inventory["b"]["file"] is None
    assert client.get("/api/sources/repo").json()["resource_version"] == 1  # one write


def test_a_batchs_runs_have_the_digests_of_their_normalised_specs_in_the_inventory_and_listing(client):
    lock = {"id": "L1", "owner": "me@h:1", "created_at": 1.0}
    assert client.post("/api/sources/repo/lock", json=lock).status_code in (200, 201)
    stamped = tiny("a")
    stamped["metadata"]["annotations"] = {"astra.revision": "sha256:x", "team": "vision"}
    stamped["metadata"]["resource_version"] = 7  # the server's to give: not part of the digest
    stamped["spec"]["task_template"]["requested_resources"]["memory_bytes"] = "1Gi"
    record = {"source": "repo", "applied_at": 5.0}
    r = client.post(
        BATCH, json={"runs": [stamped, tiny("b")], "record": record}, headers={"X-Astra-Lock": "L1"}
    )
    assert [i["status"] for i in r.json()["items"]] == [201, 201]
    inventory = client.get("/api/sources/repo/runs").json()["items"]
    listed = {
        s["name"]: s["spec_digest"]
        for s in client.get("/api/runs", params={"view": "summary"}).json()["items"]
    }
    kept = copy.deepcopy(stamped)
    kept["metadata"] = {"name": "a", "annotations": {"team": "vision"}}
    want = {"a": digest(normalize(kept)), "b": digest(normalize(tiny("b")))}
    assert {run: e["digest"] for run, e in inventory.items()} == want == listed
    assert want["a"] is not None and want["a"] != digest(normalize(tiny("a")))


def test_the_long_base_path_and_jobs_serve_it_and_get_is_405(client):
    r = client.post(LONG + "/jobs:batch", json={"runs": [tiny("a")]})
    assert r.status_code == 200 and r.json()["items"][0]["status"] == 201
    r = client.get(BATCH)
    assert r.status_code == 405 and r.headers["Allow"] == "POST"
    assert client.post(BATCH, json={"runs": []}, token=None).status_code == 401


def test_a_batch_wakes_the_scheduler_once(client, plane):
    woken = []
    client.app.state.astra.on_change = lambda: woken.append(1)
    body = json.dumps({"runs": [tiny(f"r{i}") for i in range(20)]})
    client.post(BATCH, content=body, headers={"Content-Type": "application/json"})
    assert len(woken) == 1 and len(plane.engine.state.runs) == 20
    client.post(BATCH, json={"runs": [bad("x")]})
    assert len(woken) == 1  # nothing created: nothing to schedule
    plane.step()
    assert all(r.admitted for r in plane.engine.state.runs.values())


def test_a_batch_in_a_workspace_creates_its_runs_there_each_in_its_audit_trail(client, teams):  # noqa: F811
    r = client.post(
        f"{ws('team-a')}/runs:batch", json={"runs": [tiny("a"), tiny("train")]}, token=teams["write"]
    )
    assert [i["status"] for i in r.json()["items"]] == [201, 409]  # team-a has a train already
    mine = client.get(f"{ws('team-a')}/runs", token=teams["read"]).json()["items"]
    assert [x["metadata"]["name"] for x in mine] == ["train", "a"]
    assert client.get("/api/runs/a").status_code == 404  # not the default workspace's
    assert (
        client.post(f"{ws('team-a')}/runs:batch", json={"runs": []}, token=teams["read"]).status_code == 403
    )
    events = client.get(f"{ws('team-a')}/events?run=a", token=teams["read"]).json()["items"]
    assert [(e["token"], e["action"], e["kind"], e["name"]) for e in events] == [
        ("a-write", "create", "run", "a")
    ]


def mounting(name: str, *drives: str) -> dict:
    doc = tiny(name)
    doc["spec"]["task_template"]["datavolume_refs"] = [
        {"name": d, "mount_path": f"/mnt/{i}"} for i, d in enumerate(drives)
    ]
    return doc


def test_a_run_mounting_a_drive_the_workspace_has_not_is_made_and_waits_as_post_runs_makes_it(client):
    docs = [mounting("a", "datasets"), mounting("b", "results", "nope"), mounting("c", "gone"), tiny("d")]
    body = client.post(BATCH, json={"runs": docs}).json()
    assert [(i["name"], i["status"]) for i in body["items"]] == [
        ("a", 201),
        ("b", 201),
        ("c", 201),
        ("d", 201),
    ]
    client.plane.step()
    reasons = {n: client.get(f"/api/runs/{n}").json()["status"]["reason"] for n in ("b", "c")}
    assert reasons == {
        "b": "Drive 'nope' does not exist in workspace default: astra drive create nope --path DIR",
        "c": "Drive 'gone' does not exist in workspace default: astra drive create gone --path DIR",
    }


def test_a_batchs_runs_are_in_the_audit_trail_in_order_one_event_each(client):
    docs = [tiny(f"r{i}") for i in range(30)]
    assert client.post(BATCH, json={"runs": docs}).json()["created"] == 30
    events = [e for e in client.get("/api/events").json()["items"] if e["kind"] == "run"]
    assert [(e["action"], e["name"]) for e in events] == [("create", f"r{i}") for i in range(30)]
    assert events[0]["detail"] == {"spec": docs[0]["spec"]}


def test_a_failed_batch_leaves_nothing_queued_and_runs_with_drives_still_wait_for_a_sandbox(tmp_path):
    """A batch the engine refuses whole (a name taken) leaves the scheduler as it was, without a
    sandbox still: a run mounting a drive waits, never started without its drives."""
    from reconciler.controlplane.engine import Engine
    from reconciler.controlplane.inventory import default_inventory
    from reconciler.controlplane.simulation import Outcome, SimulatedExecutor
    from reconciler.controlplane.store import NameExists, Store

    class Unsandboxed(SimulatedExecutor):
        no_sandbox = "no sandbox on this host: a run with drives waits"

    executor = Unsandboxed(Outcome(after=None))
    engine = Engine(Store(f"sqlite:///{tmp_path / 'astra.db'}"), default_inventory(), executor, 0.0)
    engine.submit(tiny("taken"), 0.0)
    with pytest.raises(NameExists):
        engine.submit_batch([tiny("new"), tiny("taken")], 0.0)
    assert sorted(engine.state.runs) == ["taken"]
    engine.store.create_drive("datasets", str(tmp_path), 0.0)
    engine.submit(mounting("mounts", "datasets"), 0.0)
    engine.step(0.0)
    assert engine.state.runs["mounts"].reason == "no sandbox on this host: a run with drives waits"
    assert engine.state.workers["mounts-0"].state == "Pending"


def test_each_document_of_a_batch_has_its_rules_checked_once(client, monkeypatch):
    from reconciler.runspec import rules, validate

    seen = []
    real = rules.check_rules
    monkeypatch.setattr(rules, "check_rules", lambda doc, **kw: seen.append(doc) or real(doc, **kw))
    monkeypatch.setattr(validate, "check_rules", rules.check_rules)
    r = client.post("/api/runs:batch", json={"runs": [tiny("one"), tiny("two")]})
    assert r.json()["created"] == 2
    assert [d["metadata"]["name"] for d in seen] == ["one", "two"]  # by validate_data; not again


def test_the_run_model_checks_the_rules_unless_told_validate_data_did():
    from pydantic import ValidationError

    from reconciler.runspec.models import RULES_CHECKED, Run

    broken = tiny("r")
    broken["spec"]["array"] = {"size": 2, "max_parallel": 3}  # more at once than the array holds
    with pytest.raises(ValidationError, match="max_parallel"):
        Run.model_validate(broken)
    assert Run.model_validate(broken, context=RULES_CHECKED).spec.array.max_parallel == 3


def test_a_batch_whose_audit_events_cannot_be_written_creates_nothing(client):
    """The runs, their inventory entries and their audit events are one transaction: a server
    that fails (or is killed) between them leaves no run without its event."""
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    from reconciler.controlplane.store.tables import AUDIT

    store = client.plane.store
    lock = {"id": "L1", "owner": "me@h:1", "created_at": 1.0}
    assert client.post("/api/sources/repo/lock", json=lock).status_code in (200, 201)
    body = {"runs": [tiny("a"), tiny("b")], "record": {"source": "repo", "applied_at": 1.0}}
    with store.engine.begin() as conn:  # the audit trail cannot be written
        conn.execute(text(f"ALTER TABLE {AUDIT.name} RENAME TO away"))
    with pytest.raises(OperationalError, match=AUDIT.name):
        client.post(BATCH, json=body, headers={LOCK_HEADER: "L1"})
    assert client.get("/api/runs").json()["items"] == []
    assert client.get("/api/sources/repo/runs").json()["items"] == {}
    with store.engine.begin() as conn:
        conn.execute(text(f"ALTER TABLE away RENAME TO {AUDIT.name}"))
    assert client.post(BATCH, json=body, headers={LOCK_HEADER: "L1"}).json()["created"] == 2
    events = [e for e in client.get("/api/events").json()["items"] if e["kind"] == "run"]
    assert [(e["action"], e["name"]) for e in events] == [("create", "a"), ("create", "b")]


def test_a_submit_and_a_batch_whose_write_fails_roll_back_alike(tmp_path, monkeypatch):
    """One rollback for both: the runs queued go, with their workers, and the error is raised."""
    from reconciler.controlplane.engine import Engine
    from reconciler.controlplane.inventory import default_inventory
    from reconciler.controlplane.simulation import Outcome, SimulatedExecutor
    from reconciler.controlplane.store import Store

    engine = Engine(
        Store(f"sqlite:///{tmp_path / 'astra.db'}"),
        default_inventory(),
        SimulatedExecutor(Outcome(after=None)),
        0.0,
    )
    engine.submit(tiny("kept"), 0.0)
    before = (sorted(engine.state.runs), sorted(engine.state.workers))

    def refused(*_, **__):
        raise OSError("disk full")

    monkeypatch.setattr(engine.store, "create_run", refused)
    monkeypatch.setattr(engine.store, "create_runs", refused)
    with pytest.raises(OSError, match="disk full"):
        engine.submit(tiny("one"), 0.0)
    assert (sorted(engine.state.runs), sorted(engine.state.workers)) == before
    with pytest.raises(OSError, match="disk full"):
        engine.submit_batch([tiny("two"), tiny("three")], 0.0)
    assert (sorted(engine.state.runs), sorted(engine.state.workers)) == before
