"""The day-2 commands against a real ``astra server`` and real processes: get, describe (with the
control plane's events), logs -f, rerun --failed, delete."""

from __future__ import annotations

import json

from .conftest import until
from .test_api import tiny
from .test_rerun import SEES


def test_a_session_of_looking_after_runs(live):
    live.api("POST", "/runs", json=tiny("sw", command=SEES, array={"size": 4, "max_parallel": 2}))
    until(lambda: live.api("GET", "/runs/sw").json()["status"]["state"] == "Failed", what="sw to fail")

    listed = live.astra("get", "runs")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split() == ["NAME", "STATE", "REASON", "WORKERS", "GPUS", "AGE", "SOURCE"]
    assert row.startswith("sw ") and " Failed " in row and " 0/4 " in row
    assert json.loads(live.astra("get", "runs", "-o", "json").stdout)[0]["task_counts"] == {
        "Completed": 2,
        "Failed": 2,
    }

    described = live.astra("describe", "run", "sw").stdout
    assert "State:     Failed" in described and "  Failed (2): sw-1, sw-3" in described
    events = described.split("Events:\n")[1].split("\n\n")[0].splitlines()
    assert events[0].split() == ["AT", "KIND", "WORKER", "STATE", "REASON"]
    assert any("StartWorker" in e and "sw-3" in e for e in events)
    assert "Last lines of sw-1 (Exited with code 1):\n  1 1 1 4 4\n" in described

    followed = live.astra("logs", "sw-1", "-f")  # an ended worker: its output, then it stops
    assert (followed.returncode, followed.stdout) == (0, "1 1 1 4 4\n")
    assert live.astra("logs", "sw-3", "--attempt", "1").stdout == "3 3 3 4 4\n"

    rerun = live.astra("rerun", "sw", "--failed", "--yes")
    shown, done = rerun.stdout.splitlines()[:2]  # what it will create, then what it did
    assert shown == "+ sw-rerun-1  a new array of the 2 copies of sw that did not complete: no GPU"
    assert done == "sw-rerun-1: reruns 2 failed copies of sw (1,3)", rerun.stderr
    until(lambda: live.api("GET", "/runs/sw-rerun-1").json()["status"]["state"] == "Failed", what="the rerun")
    assert (
        live.astra("logs", "sw-rerun-1", "--all").stdout
        == "sw-rerun-1-0 | 1 1 1 4 4\nsw-rerun-1-1 | 3 3 3 4 4\n"
    )
    assert "Reruns:    sw-rerun-1" in live.astra("describe", "run", "sw").stdout

    deleted = live.astra("delete", "sw-rerun-1", "--yes")
    assert deleted.stdout.endswith("sw-rerun-1: deleted\n")
    assert live.api("GET", "/runs/sw-rerun-1").status_code == 404


def test_logs_follow_prints_a_running_worker_s_output_until_it_ends(live):
    live.api("POST", "/runs", json=tiny("talk", command="for i in 1 2 3; do echo line $i; sleep 0.3; done"))
    until(lambda: live.api("GET", "/runs/talk").json()["status"]["state"] == "Running", what="talk to run")
    followed = live.astra("logs", "talk", "-f")
    assert (followed.returncode, followed.stdout) == (0, "line 1\nline 2\nline 3\n")


def test_apply_wait_on_a_service_that_exits_fails_naming_run_and_reason(live):
    (live.cwd / "web.yaml").write_text(
        "metadata: {name: web}\n"
        "spec:\n  lifetime: Service\n"
        "  task_template: {image: busybox, command: sh, args: [-c, 'exit 1'], time_limit_seconds: 60}\n"
    )
    done = live.astra("apply", "-f", "web.yaml", "--source", "s", "--yes", "--wait", "--settle", "30")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "astra: error: run web is Restarting: Exited with code 1; restart 1" in done.stderr
    status = live.astra("status").stdout.splitlines()  # the apply itself succeeded
    assert status[1].split()[:3] == ["s", "Ready", "ReconciliationSucceeded"], status
