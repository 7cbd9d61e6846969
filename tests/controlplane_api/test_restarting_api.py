"""A crash-looping run says so at the API's level (issue 32): ``GET /runs/NAME``'s reason names
the workers restarting and the executor's own words, where it said ``Waiting in the queue``."""

from __future__ import annotations

from .conftest import until


def crashloop() -> dict:
    return {
        "metadata": {"name": "crashloop"},
        "spec": {
            "task_template": {
                "image": "busybox",
                "command": "trainz",
                "requested_resources": {"cpu_cores": 1},
            }
        },
    }


def test_a_run_whose_command_does_not_exist_says_its_worker_restarts_and_why(client):
    plane = client.plane
    assert client.post("/api/runs", json=crashloop()).status_code == 201
    until(lambda: plane.worker("crashloop-0").restarts == 1, step=plane.step, what="the first restart")
    status = client.get("/api/runs/crashloop").json()["status"]
    assert status == {
        **status,
        "state": "Pending",
        "reason": "1 of 1 workers restarting: Worker crashloop-0: Could not start 'trainz': "
        "No such file or directory (exit code 127); restart 1 of 10 in 10 s",
    }
    listed = client.get("/api/runs").json()
    items = listed["items"] if isinstance(listed, dict) else listed
    reasons = [r["status"]["reason"] for r in items if r["metadata"]["name"] == "crashloop"]
    assert reasons == [status["reason"]]
