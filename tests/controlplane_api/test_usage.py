"""GPU-hours (issue 35): three workspaces' runs on the simulated clock, their ``GET /usage``
figures equal to a hand computation to the second, kept across a restart, a deleted run and
an audit trail of one event."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reconciler.controlplane.simulation import Outcome

from .simulated import Served

#: 2026-11-10T00:00:00Z: the scenario's first instant.
T0 = datetime(2026, 11, 10, tzinfo=UTC).timestamp()
INVENTORY = {"defaults": {"gpus": 8}, "machines": [{"name": "m0"}, {"name": "m1"}]}
LONG = "/api/v1/orgs/default/workspaces/{ws}/clusters/default/api"


def spec(name: str, gpus: int, **more) -> dict:
    tt = {
        "image": "busybox",
        "command": "true",
        "restart_policy": more.pop("restart_policy", "Never"),
        "requested_resources": {"gpu_requests": {"count": gpus}, **more.pop("resources", {})},
    }
    labels = more.pop("labels", None)
    doc = {
        "metadata": {"name": name, **({"labels": labels} if labels else {})},
        "spec": {"task_template": tt, **more},
    }
    return doc


@pytest.fixture
def served(tmp_path):
    s = Served(tmp_path, INVENTORY, start=T0, audit_keep=1)
    for ws in ("team-a", "team-b", "team-c"):
        assert s.call("PUT", f"/api/workspaces/{ws}").status_code in (200, 201)
    yield s
    s.store.close()


def submit(served: Served, ws: str, doc: dict, outcome: Outcome | None = None) -> None:
    key = f"default/{ws}/default/{doc['metadata']['name']}"
    if outcome is not None:
        served.executor.run_defaults[key] = outcome
    r = served.call("POST", LONG.format(ws=ws) + "/runs", json=doc)
    assert r.status_code == 201, r.text
    served.engine.step(served.clock.now())  # as the server's loop, woken by the write


def until_time(served: Served, at: float, start: float = T0) -> None:
    """Step the engine at every instant something is due, up to ``start + at``."""
    end = start + at
    while True:
        due = [t for t in (served.engine.next_wakeup(served.clock.now()), served.executor.next_time()) if t]
        nxt = min([t for t in due if t > served.clock.now()] or [end])
        if nxt > end:
            break
        served.clock.set(nxt)
        served.engine.step(nxt)
        if nxt == end:
            break
    served.clock.set(end)
    served.engine.step(end)


def scenario(served: Served) -> None:
    """The runs, phase by phase (times from T0, in seconds):

    * 0: team-a's array of 3 copies, 2 at once, 1 GPU, 100 s each: copies 0 and 1 hold
      [0, 100], copy 2 [100, 200]: 300 GPU-s.
    * 1000: team-b's gang of 2 workers × 4 GPUs for 300 s: 2,400 GPU-s.
    * 2000: team-c's run of 2 GPUs that fails after 50 s: 100 GPU-s, all wasted.
    * 3000: team-a's filler (8 GPUs, priority 5, 1,000 s once started) and team-c's low (8 GPUs,
      priority 0) fill both machines; 3100: team-b's high (8 GPUs, priority 10, 200 s) preempts
      filler, which at once preempts low on the other machine and starts again there (to end at
      4100); low waits, and is placed again when high ends at 3300, to run 500 s more.
      filler: 8 × (100 + 1000) = 8,800; high: 8 × 200 = 1,600; low: 8 × 100 + 8 × 500 = 4,800 GPU-s.
    """
    sweep = spec("sweep", 1, array={"size": 3, "max_parallel": 2}, labels={"project": "llm"})
    submit(served, "team-a", sweep, Outcome(after=100.0))
    until_time(served, 1000)
    gang = spec("gang", 8, start="Gang", resources={"machines": 2}, labels={"project": "llm"})
    submit(served, "team-b", gang, Outcome(after=300.0))
    until_time(served, 2000)
    submit(served, "team-c", spec("bad", 2), Outcome(exit_code=1, after=50.0))
    until_time(served, 3000)
    submit(served, "team-a", spec("filler", 8, priority=5), Outcome(after=1000.0))
    submit(served, "team-c", spec("low", 8, priority=0, labels={"project": "vision"}))
    served.executor.scripts["default/team-c/default/low-0"] = [Outcome(after=None), Outcome(after=500.0)]
    until_time(served, 3100)
    submit(served, "team-b", spec("high", 8, priority=10), Outcome(after=200.0))
    until_time(served, 5000)


#: The hand computation: GPU-seconds held, those of failed runs, runs.
BY_WORKSPACE = {
    "team-a": (3 * 100 + 8 * 1100, 0, 2),
    "team-b": (8 * 300 + 8 * 200, 0, 2),
    "team-c": (2 * 50 + 8 * 100 + 8 * 500, 2 * 50, 2),
}


def figures(report: dict) -> dict:
    return {i["key"]: (i["gpu_seconds"], i["wasted_gpu_seconds"], i["runs"]) for i in report["items"]}


def test_usage_by_workspace_equals_the_hand_computation_to_the_second(served):
    scenario(served)
    states = {
        r["metadata"]["name"]: r["status"]["state"]
        for ws in BY_WORKSPACE
        for r in served.call("GET", LONG.format(ws=ws) + "/runs").json()["items"]
    }
    assert states == {n: "Completed" for n in ("sweep", "gang", "filler", "low", "high")} | {"bad": "Failed"}
    report = served.call("GET", "/api/usage").json()
    assert figures(report) == BY_WORKSPACE
    line = {i["key"]: i for i in report["items"]}["team-c"]
    assert (line["gpu_hours"], line["wasted_gpu_hours"]) == (round(4900 / 3600, 4), round(100 / 3600, 4))
    assert report["total"]["gpu_seconds"] == sum(v[0] for v in BY_WORKSPACE.values())
    assert report["period"] == {"start": None, "end": T0 + 5000, "label": "all time"}


def test_usage_by_run_and_by_label(served):
    scenario(served)
    by_run = figures(served.call("GET", "/api/usage", params={"by": "run"}).json())
    assert by_run == {
        "sweep": (300, 0, 1),
        "filler": (8800, 0, 1),
        "gang": (2400, 0, 1),
        "high": (1600, 0, 1),
        "bad": (100, 100, 1),
        "low": (4800, 0, 1),
    }
    by_label = served.call("GET", "/api/usage", params={"by": "label:project"}).json()
    assert [(i["workspace"], i["key"], i["gpu_seconds"]) for i in by_label["items"]] == [
        ("team-a", "-", 8800),
        ("team-a", "llm", 300),
        ("team-b", "-", 1600),
        ("team-b", "llm", 2400),
        ("team-c", "-", 100),
        ("team-c", "vision", 4800),
    ]


def test_a_period_counts_only_the_part_of_a_hold_within_it(served):
    scenario(served)
    served.clock.advance(1800)  # now T0 + 6800: the last hour is from T0 + 3200
    report = served.call("GET", "/api/usage", params={"since": "1h"}).json()
    assert figures(report) == {
        "team-a": (8 * 900, 0, 1),
        "team-b": (8 * 100, 0, 1),
        "team-c": (8 * 500, 0, 1),
    }
    assert figures(served.call("GET", "/api/usage", params={"month": "2026-11"}).json()) == BY_WORKSPACE
    assert served.call("GET", "/api/usage", params={"month": "2026-10"}).json()["items"] == []
    r = served.call("GET", "/api/usage", params={"since": "1h", "month": "2026-11"})
    assert (r.status_code, r.json()["detail"]) == (422, "give --since or --month, not both")
    r = served.call("GET", "/api/usage", params={"since": "1 hour"})
    assert (r.status_code, r.json()["detail"]) == (422, r"since must match ^\d{1,6}[dhmw]$")


def test_usage_is_kept_across_a_restart_a_deleted_run_and_a_short_audit_trail(served):
    scenario(served)
    assert served.call("DELETE", LONG.format(ws="team-c") + "/runs/bad").status_code in (200, 204)
    served.restart()
    assert figures(served.call("GET", "/api/usage").json()) == BY_WORKSPACE


def test_a_hold_open_at_a_restart_ends_when_the_control_plane_finds_it_gone(served):
    submit(served, "team-a", spec("long", 4))
    until_time(served, 100)
    served.clock.advance(50)
    served.restart()  # the worker's process is gone: its hold ends now, at T0 + 150
    served.clock.advance(1000)
    assert figures(served.call("GET", "/api/usage").json())["team-a"] == (4 * 150, 0, 1)


def test_a_workspace_token_sees_its_own_workspace_only(served):
    scenario(served)
    made = served.call(
        "POST",
        LONG.format(ws="team-b") + "/tokens",
        json={"name": "b-read", "role": "read", "workspace": "team-b"},
    )
    token = made.json()["token"]
    report = served.call("GET", LONG.format(ws="team-b") + "/usage", token=token).json()
    assert figures(report) == {"team-b": BY_WORKSPACE["team-b"]}
