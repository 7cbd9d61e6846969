"""GPU-hour budgets (issue 35): once a workspace's budget for the month is spent, its new runs
wait with the budget's words while its running runs go on; the next month lets them start."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reconciler.controlplane.simulation import Outcome

from .simulated import Served
from .test_usage import INVENTORY, LONG, spec, submit
from .test_usage import until_time as until

#: 2026-11-30T22:00:00Z: two hours before December.
T0 = datetime(2026, 11, 30, 22, tzinfo=UTC).timestamp()
SPENT = "Workspace team-a has used its 1 GPU-hours this month"


@pytest.fixture
def served(tmp_path):
    s = Served(tmp_path, INVENTORY, start=T0)
    for ws in ("team-a", "team-b"):
        s.call("PUT", f"/api/workspaces/{ws}")
    yield s
    s.store.close()


def run_of(served: Served, name: str, ws: str = "team-a") -> dict:
    return served.call("GET", LONG.format(ws=ws) + f"/runs/{name}").json()


def until_time(served: Served, at: float) -> None:
    until(served, at, T0)


def test_a_spent_budget_holds_new_runs_until_the_next_month(served):
    r = served.call("PUT", "/api/workspaces/team-a/budget", json={"gpu_hours": 1, "per": "month"})
    assert r.status_code == 200, r.text
    assert r.json()["period"]["label"] == "2026-11"
    submit(served, "team-a", spec("first", 4), Outcome(after=1200.0))  # 4 GPUs: 1 GPU-hour at 900 s
    submit(served, "team-b", spec("other", 4), Outcome(after=None))
    until_time(served, 1000)
    submit(served, "team-a", spec("second", 1), Outcome(after=60.0))
    assert run_of(served, "first")["status"]["state"] == "Running"  # running runs go on
    status = run_of(served, "second")["status"]
    assert (status["state"], status["reason"]) == ("Pending", SPENT)
    assert run_of(served, "other", "team-b")["status"]["state"] == "Running"  # another workspace
    budget = served.call("GET", "/api/workspaces/team-a/budget").json()
    assert (budget["used_gpu_hours"], budget["left_gpu_hours"]) == (round(4 * 1000 / 3600, 4), 0)
    until_time(served, 2 * 3600 - 1)  # 23:59:59: still November
    assert run_of(served, "second")["status"]["state"] == "Pending"
    until_time(served, 2 * 3600)  # December: the budget is the new month's
    assert run_of(served, "second")["status"]["state"] == "Running"
    budget = served.call("GET", "/api/workspaces/team-a/budget").json()
    assert budget["period"]["label"] == "2026-12" and budget["used_gpu_hours"] == 0


def test_a_budget_is_kept_across_a_restart_and_lifted_with_null(served):
    served.call("PUT", "/api/workspaces/team-a/budget", json={"gpu_hours": 0, "per": "week"})
    served.restart()
    submit(served, "team-a", spec("held", 1))
    assert run_of(served, "held")["status"]["reason"] == "Workspace team-a has used its 0 GPU-hours this week"
    served.call("PUT", "/api/workspaces/team-a/budget", json={"gpu_hours": None})
    served.engine.step(served.clock.now())
    assert run_of(served, "held")["status"]["state"] == "Running"
    assert served.call("GET", "/api/workspaces/team-a/budget").json()["gpu_hours"] is None


def test_only_the_org_s_admin_sets_a_budget(served):
    made = served.call(
        "POST", "/api/tokens", json={"name": "a-admin", "role": "admin", "workspace": "team-a"}
    )
    token = made.json()["token"]
    r = served.call(
        "PUT", LONG.format(ws="team-a") + "/workspaces/team-a/budget", token=token, json={"gpu_hours": 9}
    )
    assert r.status_code == 403
    assert r.json()["detail"].endswith("setting a budget needs the org's admin")
