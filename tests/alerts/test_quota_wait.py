"""``run.quota_wait``: a run that waited on its workspace's quota longer than an alert's
``waited`` is told once per run per wait, on the engine's simulated clock (a simulated executor:
the run holding the quota never ends by itself), across a restart of the delivery too."""

from __future__ import annotations

import random

import pytest

from reconciler.controlplane.alerts.delivery import Delivery
from reconciler.controlplane.alerts.waits import QuotaWaits, is_quota_reason
from tests.controlplane_api.simulated import Served

WS = "default/default"
INVENTORY = {"defaults": {"gpus": 8}, "machines": [{"name": "m0"}, {"name": "m1"}]}


def run(name: str, gpus: int) -> dict:
    spec = {"task_template": {"image": "busybox", "command": "true"}}
    spec["task_template"]["requested_resources"] = {"gpu_requests": {"count": gpus}}
    return {"metadata": {"name": name}, "spec": spec}


@pytest.fixture
def served(tmp_path):
    s = Served(tmp_path, INVENTORY)
    yield s
    s.store.close()


def texts(receiver, path: str) -> list[str]:
    return [r.json()["text"] for r in receiver.got if r.path == path]


def test_a_run_waiting_on_its_quota_is_told_once_per_alert_when_its_wait_passes_the_alerts_limit(
    served, receiver
):
    secrets = {"quick": (receiver.url + "/quick").encode(), "slow": (receiver.url + "/slow").encode()}
    for name, waited in (("quick", "10m"), ("slow", "1h")):
        body = {"sink": {"kind": "slack", "url": name}, "events": ["run.quota_wait"], "waited": waited}
        assert served.call("PUT", f"/api/alerts/{name}", json=body).status_code == 201
    assert served.call("GET", "/api/alerts").json()["items"][0]["waited"] == 600

    def delivery() -> Delivery:
        return Delivery(
            served.store, lambda ws, n: secrets.get(n), clock=served.clock.now, rng=random.Random(1)
        )

    d = delivery()
    d.step()
    served.call("PUT", "/api/workspaces/default/quota", json={"gpus": 8})
    served.call("POST", "/api/runs", json=run("first", 8))
    served.step()
    served.call("POST", "/api/runs", json=run("second", 4))
    served.step()
    reason = served.call("GET", "/api/runs/second").json()["status"]["reason"]
    assert is_quota_reason(reason), reason  # the scheduler's own words for it
    for _ in range(9):  # 9 minutes of ticks: not yet
        served.step(60.0)
        d.step()
    assert receiver.got == []
    served.step(61.0)
    for _ in range(5):  # every step after: still one message
        d.step()
        served.step(30.0)
    assert texts(receiver, "/quick") == [
        "[warning] run second has waited on its workspace's quota for 10m: "
        "Workspace default is at its quota of 8 GPUs"
    ]
    again = delivery()  # the server started again: the wait is rebuilt from the events, not told again
    served.step(50 * 60.0)
    again.step()
    assert len(texts(receiver, "/quick")) == 1
    assert texts(receiver, "/slow") == [
        "[warning] run second has waited on its workspace's quota for 1h: "
        "Workspace default is at its quota of 8 GPUs"
    ]
    (message,) = [m for m in served.store.alert_history(WS, "quick")]
    assert message["event"]["waited"] == 600 and message["event"]["run"] == "second"


def test_a_wait_that_ends_before_the_limit_is_never_told_and_a_new_wait_is_a_new_message(served, receiver):
    body = {"sink": {"kind": "slack", "url": "chat"}, "events": ["run.quota_wait"], "waited": 600}
    assert served.call("PUT", "/api/alerts/chat", json=body).status_code == 201
    d = Delivery(served.store, lambda ws, n: receiver.url.encode(), clock=served.clock.now)
    d.step()
    served.call("PUT", "/api/workspaces/default/quota", json={"gpus": 8})
    served.call("POST", "/api/runs", json=run("first", 8))
    served.step()
    served.call("POST", "/api/runs", json=run("second", 4))
    served.step(60.0)
    d.step()
    served.call("PUT", "/api/workspaces/default/quota", json={"gpus": 16})  # room: it starts
    served.step(1.0)
    assert served.call("GET", "/api/runs/second").json()["status"]["state"] != "Pending"
    served.step(3600.0)
    d.step()
    assert receiver.got == []  # its wait ended at 1 minute
    served.call("PUT", "/api/workspaces/default/quota", json={"gpus": 12})  # the 12 held: full again
    served.call("POST", "/api/runs", json=run("third", 4))
    served.step(1.0)
    served.step(601.0)
    d.step()
    assert [r.json()["text"].split(":")[0] for r in receiver.got] == [
        "[warning] run third has waited on its workspace's quota for 10m"
    ]


def test_the_quota_reasons_are_the_schedulers_and_only_those():
    from reconciler.runspec.vocabulary import budget_spent, quota_gpus, quota_runs

    assert is_quota_reason(quota_gpus("team-a", 8)) and is_quota_reason(quota_runs("team-a", 2))
    assert not is_quota_reason(budget_spent("team-a", 5000, "month"))
    assert not is_quota_reason("Waiting for room: 8 GPUs on one network")
    waits = QuotaWaits()
    pending = {"worker": None, "state": "Pending", "run": "r", "reason": quota_gpus("w", 8)}
    waits.see(
        [{**pending, "id": 1, "at": 10.0}, {**pending, "id": 2, "at": 20.0, "reason": quota_runs("w", 1)}]
    )
    assert waits.open["r"].since == 10.0 and waits.open["r"].first == 1  # one wait, whatever its words
    waits.see([{**pending, "id": 3, "at": 30.0, "state": "Running", "reason": ""}])
    assert waits.open == {}
