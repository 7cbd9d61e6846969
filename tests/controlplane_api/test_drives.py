"""Drives over the API (``/drives``): create, list, read, delete; a run naming one that is not there.

Through httpx's ASGI transport, on a plane with no sandbox (the sandbox itself, for real, is
tests/hostile/test_sandbox.py). The ``client`` fixture's workspace has the seeds' drives,
``datasets`` and ``results``.
"""

from __future__ import annotations

from .conftest import LONG, Client, Plane
from .test_api import seed, tiny


def with_drive(name: str, drive: str, mode: str = "ReadWrite") -> dict:
    doc = tiny(name)
    doc["spec"]["task_template"]["datavolume_refs"] = [{"name": drive, "mount_path": "/d", "mode": mode}]
    return doc


DATASETS = "Drive 'datasets' does not exist in workspace default: astra drive create datasets --path DIR"
RESULTS = "Drive 'results' does not exist in workspace default: astra drive create results --path DIR"


def _reasons(client: Client, name: str) -> set[str]:
    return {w["reason"] for w in client.get(f"/api/runs/{name}/workers").json()["items"]}


def test_the_seeds_sweep_is_accepted_and_waits_for_its_drives_until_both_exist(plane, tmp_path):
    client = Client(plane)
    r = client.post("/api/jobs", json=seed("sweep"))  # the seed's curl | jq .spec.array
    assert r.status_code == 201 and r.json()["spec"]["array"] == {"size": 100, "max_parallel": 8}
    plane.step()
    run = client.get("/api/jobs/sweep").json()
    assert (run["status"]["state"], run["status"]["reason"]) == ("Pending", DATASETS)
    assert run["task_counts"] == {"Pending": 100}  # the seed's jq .task_counts: 100 workers
    assert _reasons(client, "sweep") == {DATASETS}
    for name in ("datasets", "results"):
        (tmp_path / name).mkdir()
    assert (
        client.post("/api/drives", json={"name": "datasets", "path": str(tmp_path / "datasets")}).status_code
        == 201
    )
    plane.step()
    assert client.get("/api/jobs/sweep").json()["status"]["reason"] == RESULTS
    assert _reasons(client, "sweep") == {RESULTS}
    assert (
        client.post("/api/drives", json={"name": "results", "path": str(tmp_path / "results")}).status_code
        == 201
    )
    plane.step()  # no more waiting for drives: this plane has no sandbox, which it says next
    assert (
        client.get("/api/jobs/sweep").json()["status"]["reason"]
        == "Drives need a sandbox: install bubblewrap"
    )


def test_a_task_groups_drive_is_waited_for_too(client):
    doc = seed("llama-ft")
    doc["metadata"]["name"] = "grouped"
    doc["spec"] = {
        "task_groups": [
            {
                "name": "a",
                "replicas": 1,
                "task_template": with_drive("x", "results")["spec"]["task_template"],
            },
            {
                "name": "b",
                "replicas": 1,
                "task_template": with_drive("x", "scratch")["spec"]["task_template"],
            },
        ]
    }
    assert client.post("/api/runs", json=doc).status_code == 201
    client.plane.step()
    said = "Drive 'scratch' does not exist in workspace default: astra drive create scratch --path DIR"
    assert client.get("/api/runs/grouped").json()["status"]["reason"] == said


def test_create_list_read_and_delete_a_drive_with_a_folder_of_its_own(client, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    r = client.post(f"{LONG}/drives", json={"name": "mine", "path": str(folder)})
    assert r.status_code == 201
    body = r.json()
    assert {k: body[k] for k in ("name", "workspace", "path", "used_by")} == {
        "name": "mine",
        "workspace": "default",
        "path": str(folder),
        "used_by": [],
    }
    assert [d["name"] for d in client.get("/api/drives").json()["items"]] == ["datasets", "mine", "results"]
    assert client.get("/api/drives/mine").json() == body
    again = client.post("/api/drives", json={"name": "mine"})
    assert (again.status_code, again.json()) == (409, {"detail": "drive 'mine' exists in workspace default"})
    assert client.delete("/api/drives/mine").json() == body
    assert folder.is_dir()  # forgotten, not removed
    gone = client.get("/api/drives/mine")
    assert (gone.status_code, gone.json()) == (
        404,
        {"detail": "drive 'mine' does not exist in workspace default"},
    )


def test_a_folder_that_is_not_there_is_refused_in_words(client, tmp_path):
    r = client.post("/api/drives", json={"name": "lost", "path": str(tmp_path / "nowhere")})
    assert r.status_code == 422
    assert r.json() == [
        {
            "path": "path",
            "message": f"{tmp_path / 'nowhere'} is not a folder of the cluster's host: make it first",
        }
    ]
    bad = client.post("/api/drives", json={"name": "Not A Name"})
    assert bad.status_code == 422 and bad.json()[0]["path"] == "name"


def test_a_drive_a_run_mounts_cannot_be_deleted_until_the_run_is_gone(client):
    assert client.post("/api/runs", json=with_drive("uses", "results", "ReadOnly")).status_code == 201
    assert client.get("/api/drives/results").json()["used_by"] == ["uses"]
    r = client.delete("/api/drives/results")
    assert r.status_code == 409
    assert r.json() == {
        "detail": "drive 'results' is in use by run uses: delete it, or wait for it to end, first"
    }
    assert client.delete("/api/runs/uses").status_code == 200
    assert client.delete("/api/drives/results").status_code == 200


def test_without_a_sandbox_a_run_with_drives_waits_with_its_reason_and_holds_no_one_back(client, plane):
    assert client.post("/api/runs", json=with_drive("boxed", "results")).status_code == 201
    assert client.post("/api/runs", json=tiny("plain")).status_code == 201
    plane.step()
    boxed = client.get("/api/runs/boxed").json()["status"]
    assert (boxed["state"], boxed["reason"]) == ("Pending", "Drives need a sandbox: install bubblewrap")
    workers = client.get("/api/runs/boxed/workers").json()["items"]
    assert [(w["state"], w["reason"], w["machine"]) for w in workers] == [
        ("Pending", "Drives need a sandbox: install bubblewrap", None)
    ]
    plane.settle_run("plain")
    assert plane.run("plain").state == "Completed"


def test_a_server_without_a_drives_folder_needs_a_path(tmp_path):
    plane = Plane(tmp_path)
    try:
        r = Client(plane).post("/api/drives", json={"name": "x"})
        assert r.status_code == 422
        assert r.json()[0]["message"] == "this server keeps no drives of its own: give the drive's folder"
    finally:
        plane.close()
