"""The REST API as a client sees it (CONTRACT §5), through httpx's ASGI transport."""

from __future__ import annotations

import json

import pytest

from reconciler.runspec.normalize import spec_digest
from reconciler.runspec.validate import validate_data

from .conftest import LONG, SEEDS


def seed(name: str) -> dict:
    return json.loads((SEEDS / f"{name}.json").read_text())


def tiny(name: str, *, command: str = "true", **spec) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "task_template": {
                "image": "busybox",
                "command": "sh",
                "args": ["-c", command],
                "restart_policy": "Never",
                "requested_resources": {"cpu_cores": 1},
            },
            **spec,
        },
    }


@pytest.mark.parametrize("prefix", ["/api", LONG])
def test_post_run_returns_201_and_the_run_on_both_base_paths(client, prefix):
    r = client.post(f"{prefix}/runs", json=seed("llama-ft"))
    assert r.status_code == 201
    body = r.json()
    assert body["metadata"] == {"name": "llama-ft", "resource_version": 1}
    assert body["spec"] == seed("llama-ft")["spec"]
    assert body["status"]["state"] == "Pending"
    assert r.headers["location"].endswith(f"{LONG}/runs/llama-ft")
    assert client.get(f"{prefix}/runs/llama-ft").json()["spec"] == body["spec"]


def test_jobs_is_runs_and_the_sweep_array_comes_back_as_given(client):
    r = client.post("/api/jobs", json=seed("sweep"))
    assert r.status_code == 201
    assert r.json()["spec"]["array"] == {"size": 100, "max_parallel": 8}
    assert client.get("/api/runs/sweep").json()["task_counts"] == {"Pending": 100}
    assert [x["metadata"]["name"] for x in client.get("/api/jobs").json()["items"]] == ["sweep"]


def test_task_counts_follow_the_scheduler(client, plane):
    doc = seed("sweep")  # without its drives: this plane has no sandbox to mount them
    del doc["spec"]["task_template"]["datavolume_refs"]
    client.post("/api/runs", json=doc)
    plane.step()
    counts = client.get("/api/jobs/sweep").json()["task_counts"]
    assert counts["Running"] == 8 and sum(counts.values()) == 100


def test_a_name_clash_is_409(client):
    assert client.post("/api/runs", json=tiny("a")).status_code == 201
    r = client.post("/api/runs", json=tiny("a"))
    assert r.status_code == 409
    assert r.json()["detail"] == "a run named a exists"


def test_422_carries_exactly_the_messages_of_validate_data(client):
    bad = seed("sweep")
    bad["spec"]["start"] = "Gang"
    bad["spec"]["array"]["size"] = 0
    bad["spec"]["colour"] = "blue"
    r = client.post("/api/runs", json=bad)
    assert r.status_code == 422
    expected = [{"path": str(e.path), "message": e.message} for e in validate_data(bad)]
    assert r.json() == expected
    messages = {p["path"]: p["message"] for p in r.json()}
    assert messages["spec.start"] == "An array's workers are independent: use policy Independent"
    assert messages["spec.array.size"] == "array.size must be from 1 to 10000"
    assert client.get("/api/runs").json()["items"] == []


def test_422_says_issue_31_s_bad_values_in_validate_s_words(client):
    bad = tiny("bad")
    bad["spec"]["replace"] = "Later"
    bad["spec"]["depends_on"] = [{"run": "x", "when": "Sometime"}]
    bad["spec"]["task_template"].update(
        stop_grace_seconds=5000, stop_signal="KILL", on_exit_codes=[{"codes": [0], "action": "Fail"}]
    )
    r = client.post("/api/runs", json=bad)
    assert r.status_code == 422
    assert {p["path"]: p["message"] for p in r.json()} == {
        "spec.depends_on[0].when": 'must be one of Completed, Failed, Finished, not the string "Sometime"',
        "spec.replace": 'must be one of WhenFinished, Immediately, not the string "Later"',
        "spec.task_template.on_exit_codes[0].action": (
            'must be one of FailJob, Restart, RestartIgnoreBudget, not the string "Fail"; '
            "did you mean 'FailJob'?"
        ),
        "spec.task_template.on_exit_codes[0].codes[0]": "an exit code is from 1 to 255",
        "spec.task_template.stop_grace_seconds": "stop_grace_seconds must be from 0 to 3600",
        "spec.task_template.stop_signal": (
            'must be one of TERM, INT, USR1, USR2, HUP, QUIT, not the string "KILL"'
        ),
    }


def test_422_for_a_body_that_is_not_json(client):
    r = client.post("/api/runs", content=b"{nope", headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()[0]["message"].startswith("the body is not JSON")


@pytest.mark.parametrize("path", ["/api/runs", f"{LONG}/runs", "/api/sources/x", "/api/workers/x/logs"])
def test_401_without_a_token_or_with_another(client, path):
    assert client.get(path, token=None).status_code == 401
    r = client.get(path, token="wrong")
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"


def test_403_for_another_workspace(client):
    r = client.get("/api/v1/orgs/acme/workspaces/default/clusters/default/api/runs")
    assert r.status_code == 403
    assert "not workspace default of org acme" in r.json()["detail"]
    assert client.get("/api/v1/orgs/default/workspaces/other/clusters/default/api/runs").status_code == 403


def test_put_with_the_current_resource_version_updates_and_a_stale_one_is_409(client):
    created = client.post("/api/runs", json=tiny("a")).json()
    doc = {"metadata": created["metadata"], "spec": {**created["spec"], "priority": 5}}
    r = client.put("/api/runs/a", json=doc)
    assert r.status_code == 200
    assert r.json()["metadata"]["resource_version"] == 2 and r.json()["spec"]["priority"] == 5
    stale = client.put("/api/runs/a", json=doc)  # still resource_version 1
    assert stale.status_code == 409
    assert stale.json()["resource_version"] == 2
    assert "resource_version 1 is stale" in stale.json()["detail"]


def test_put_of_another_name_is_422_and_of_no_run_404(client):
    client.post("/api/runs", json=tiny("a"))
    assert client.put("/api/runs/a", json=tiny("b")).status_code == 422
    assert client.put("/api/runs/zzz", json=tiny("zzz")).status_code == 404


def test_delete_cancels_and_deletes(client, plane):
    client.post("/api/runs", json=tiny("a", command="exec sleep 300"))
    plane.step()
    assert plane.worker("a-0").state == "Running"
    r = client.delete("/api/runs/a")
    assert r.status_code == 200 and r.json()["status"]["state"] == "Cancelled"
    assert client.get("/api/runs/a").status_code == 404
    assert client.post("/api/runs", json=tiny("a")).status_code == 201  # the name is free again


def test_workers_and_tasks_list_name_rank_state_machine_reason_exit_code(client, plane):
    client.post("/api/runs", json=tiny("s", command="exit 3", array={"size": 3, "max_parallel": 2}))
    plane.settle_run("s")
    for path in ("/api/runs/s/workers", "/api/jobs/s/tasks"):
        body = client.get(path).json()
        assert [w["name"] for w in body["items"]] == ["s-0", "s-1", "s-2"]
        w = body["items"][0]
        assert {"name", "rank", "state", "machine", "reason", "exit_code"} <= set(w)
        assert (w["state"], w["reason"], w["exit_code"]) == ("Failed", "Exited with code 3", 3)
        assert body["readout"] == "Workers 0 running of 3"
    run = client.get("/api/runs/s").json()
    assert run["status"]["reason"] == (
        f"3 of 3 workers failed; the first: Worker s-0 failed on {w['machine']}: Exited with code 3"
    )
    assert client.get("/api/workers/s-1").json()["rank"] == 1
    assert client.get("/api/tasks/s-9").status_code == 404


def test_logs_are_the_output_of_the_latest_attempt(client, plane):
    client.post("/api/runs", json=tiny("hello", command="echo hello from $RANK; echo oops >&2"))
    plane.settle_run("hello")
    r = client.get("/api/workers/hello-0/logs")
    assert r.status_code == 200 and r.text == "hello from 0\noops\n"
    assert client.get("/api/tasks/hello-0/logs?attempt=1").text == r.text
    assert client.get("/api/workers/hello-0/logs?attempt=7").status_code == 404


def test_events_record_each_start_and_exit(client, plane):
    client.post("/api/runs", json=tiny("e"))
    plane.settle_run("e")
    kinds = [e["kind"] for e in client.get("/api/runs/e/events").json()["items"]]
    assert kinds.index("StartWorker") < kinds.index("WorkerExited")


# ---- sources -------------------------------------------------------------------------------------


def test_a_source_is_404_until_written_then_kept_with_resource_versions(client):
    assert client.get("/api/sources/repo").status_code == 404
    state = {
        "inventory": {"a": {"spec": tiny("a"), "applied_at": 1.0, "file": "a.yaml"}},
        "status": {"state": "Ready"},
        "history": [],
        "note": "any other key is kept",
    }
    r = client.put("/api/sources/repo", json={"resource_version": 0, **state})
    assert r.status_code == 200
    served = {"a": {**state["inventory"]["a"], "digest": spec_digest(tiny("a"))}}
    assert r.json() == {**state, "inventory": served, "name": "repo", "resource_version": 1, "lock": None}
    again = client.put("/api/sources/repo", json={"resource_version": 1, **state, "inventory": {}})
    assert again.json()["resource_version"] == 2 and again.json()["inventory"] == {}
    stale = client.put("/api/sources/repo", json={"resource_version": 1, **state})
    assert stale.status_code == 409 and stale.json()["resource_version"] == 2
    assert [s["name"] for s in client.get("/api/sources").json()["items"]] == ["repo"]
    bad = client.put("/api/sources/repo", json={"resource_version": 2, "inventory": ["a"], "status": 1})
    assert bad.status_code == 422
    assert [p["path"] for p in bad.json()] == ["inventory", "status"]


def test_a_source_lock_is_taken_once_and_names_its_holder(client):
    r = client.post("/api/sources/repo/lock", json={"owner": "ana@laptop", "id": "L1"})
    assert r.status_code == 201
    lock = r.json()
    assert (lock["id"], lock["owner"]) == ("L1", "ana@laptop") and isinstance(lock["created_at"], float)
    held = client.post("/api/sources/repo/lock", json={"owner": "bob@ci"})
    assert held.status_code == 409
    assert held.json()["lock"] == lock and "locked by ana@laptop" in held.json()["detail"]
    assert client.get("/api/sources/repo").json()["lock"] == lock
    put = client.put("/api/sources/repo", json={"resource_version": 0, "lock_id": "other"})
    assert put.status_code == 409
    assert client.put("/api/sources/repo", json={"resource_version": 0, "lock_id": "L1"}).status_code == 200
    assert client.delete("/api/sources/repo/lock?id=nope").status_code == 409
    assert client.delete("/api/sources/repo/lock?id=L1").status_code == 204
    assert client.delete("/api/sources/repo/lock").status_code == 404
    assert client.post("/api/sources/repo/lock", json={"owner": "bob@ci"}).status_code == 201
    assert client.delete("/api/sources/repo/lock").status_code == 204  # force-unlock


def test_source_names_may_hold_slashes(client):
    name = "github.com%2Facme%2Fruns//deploy"
    assert client.put(f"/api/sources/{name}", json={"status": {"state": "Ready"}}).status_code == 200
    assert client.get(f"/api/sources/{name}").json()["name"] == "github.com/acme/runs//deploy"
    assert client.post(f"/api/sources/{name}/lock", json={"owner": "me", "id": "L"}).status_code == 201
    assert client.get(f"/api/sources/{name}").json()["lock"]["id"] == "L"
    assert client.delete(f"/api/sources/{name}/lock?id=L").status_code == 204


def test_a_put_that_changes_a_replace_only_field_is_422_naming_it(client):
    client.post("/api/runs", json=seed("sweep"))
    bigger = seed("sweep")
    bigger["metadata"]["resource_version"] = 1
    bigger["spec"]["array"] = {"size": 200, "max_parallel": 8}
    bigger["spec"]["task_template"]["args"] = ["/data/code/other.py"]
    r = client.put("/api/runs/sweep", json=bigger)
    assert r.status_code == 422
    assert [p["path"] for p in r.json()] == ["spec.array.size", "spec.task_template.args"]
    assert r.json()[0]["message"].startswith("spec.array.size cannot change on a run in place")
    kept = client.get("/api/runs/sweep").json()
    assert (kept["metadata"]["resource_version"], kept["spec"]["array"]["size"]) == (1, 100)
    wider = seed("sweep")
    wider["metadata"]["resource_version"] = 1
    wider["spec"]["array"]["max_parallel"] = 20
    assert client.put("/api/runs/sweep", json=wider).status_code == 200
