"""``GET /metrics``: who may scrape it, and that its figures are the API's (issue 35).

A simulated executor on the manual clock drives the engine; the scrape is parsed with
prometheus-client's own parser and compared with what the API answers at the same moment.
"""

from __future__ import annotations

import pytest

from reconciler.controlplane.metrics import reason_class, route_label
from reconciler.controlplane.simulation import Outcome

from .simulated import Served

INVENTORY = {
    "defaults": {"gpus": 8},
    "machines": [
        {"name": "m0", "rack": "r1"},
        {"name": "m1", "rack": "r1"},
        {"name": "m2", "rack": "r2", "healthy_gpus": 6},
    ],
}


def run(name: str, gpus: int, *, array: dict | None = None, command: str = "true") -> dict:
    spec: dict = {
        "task_template": {
            "image": "busybox",
            "command": command,
            "requested_resources": {"gpu_requests": {"count": gpus}},
        }
    }
    if array:
        spec["array"] = array
    return {"metadata": {"name": name}, "spec": spec}


def total(samples, name: str, **labels: str) -> float:
    return sum(
        v
        for (n, ls), v in samples.items()
        if n == name and all(dict(ls).get(k) == x for k, x in labels.items())
    )


@pytest.fixture
def served(tmp_path):
    s = Served(tmp_path, INVENTORY)
    yield s
    s.store.close()


def test_a_scrape_needs_a_token_with_read_on_the_whole_org(served):
    r = served.call("GET", "/metrics", None)
    assert r.status_code == 401 and "Bearer" in r.headers["www-authenticate"]
    made = served.call(
        "POST", "/api/tokens", json={"name": "ws-read", "role": "read", "workspace": "default"}
    )
    r = served.call("GET", "/metrics", made.json()["token"])
    assert r.status_code == 403
    assert r.json()["detail"] == (
        "this token (ws-read) holds read in workspace default of org default: /metrics needs read on "
        "the whole org (astra token create prometheus --workspace '*' --role read)"
    )
    org = served.call("POST", "/api/tokens", json={"name": "prom", "role": "read", "workspace": "*"})
    assert served.call("GET", "/metrics", org.json()["token"]).status_code == 200


def test_workers_gpus_and_failed_runs_are_what_the_api_says(served):
    served.executor.run_defaults["bad"] = Outcome(exit_code=1, after=5.0)
    assert served.call("POST", "/api/runs", json=run("train", 4)).status_code == 201
    assert (
        served.call(
            "POST", "/api/runs", json=run("sweep", 1, array={"size": 6, "max_parallel": 3})
        ).status_code
        == 201
    )
    bad = run("bad", 2)
    bad["spec"]["task_template"]["restart_policy"] = "Never"
    assert served.call("POST", "/api/runs", json=bad).status_code == 201
    served.step()
    served.step(10.0)
    running = served.call("GET", "/api/tasks", params={"state": "Running"}).json()["items"]
    usage = served.call("GET", "/api/workspaces/default").json()["usage"]
    failed = [r for r in served.call("GET", "/api/runs").json()["items"] if r["status"]["state"] == "Failed"]
    m = served.scrape()
    assert total(m, "astra_workers", state="Running", workspace="default") == len(running) == 4
    assert total(m, "astra_machine_gpus_allocated") == usage["gpus"] == 7
    assert total(m, "astra_workspace_gpus_allocated", workspace="default") == 7
    assert total(m, "astra_runs", state="Failed") == len(failed) == 1
    waiting = served.call("GET", "/api/tasks", params={"state": "Pending"}).json()["items"]
    capped = [w for w in waiting if w["reason"] == "Array runs at most 3 workers at once"]
    assert total(m, "astra_queue_waiting_workers", **{"class": "max_parallel"}) == len(capped) >= 1
    assert total(m, "astra_queue_waiting_workers") == len(waiting) == 3
    assert total(m, "astra_machine_gpus_unhealthy", machine="m2", rack="r2") == 2
    assert total(m, "astra_machine_gpus") == 24
    assert total(m, "astra_machine_gpus_free") + total(m, "astra_machine_gpus_allocated") == 24 - 2


def test_the_queue_by_reason_class_and_its_oldest_wait(served):
    served.call("PUT", "/api/workspaces/default/quota", json={"gpus": 8})
    served.call("POST", "/api/runs", json=run("first", 8))
    served.step()
    served.call("POST", "/api/runs", json=run("second", 4))
    served.step(30.0)
    served.clock.advance(90.0)
    m = served.scrape()
    assert total(m, "astra_queue_waiting_runs", workspace="default", **{"class": "quota"}) == 1
    assert total(m, "astra_queue_oldest_wait_seconds", workspace="default") == 120.0


def test_requests_are_counted_by_route_template_never_by_a_run_s_name(served):
    served.call("POST", "/api/runs", json=run("secret-project-17", 1))
    served.call("GET", "/api/runs/secret-project-17")
    served.call("GET", "/api/runs/no-such-run")
    served.call("GET", "/api/v1/orgs/default/workspaces/default/clusters/default/api/runs/no-such-run")
    served.step()
    served.call("PUT", "/api/sources/site", json={"status": {}})
    served.call("PUT", "/api/sources/site/status", json={"state": "Ready", "updated_at": 1_000_010.0})
    served.call("PUT", "/api/sources/site/status", json={"state": "Stalled", "updated_at": 1_000_020.0})
    m = served.scrape()
    assert total(m, "astra_api_requests_total", route="/runs/{name}", method="GET", status="404") == 2
    assert total(m, "astra_api_requests_total", route="/runs/{name}", method="GET", status="200") == 1
    assert total(m, "astra_api_requests_total", route="/runs", method="POST", status="201") == 1
    assert total(m, "astra_api_request_duration_seconds_count", route="/runs/{name}") == 3
    assert total(m, "astra_source_reconciles_total", source="site") == 2
    assert total(m, "astra_source_status", source="site", state="Stalled") == 1
    assert total(m, "astra_source_status_updated_timestamp_seconds", source="site") == 1_000_020.0
    assert total(m, "astra_store_bytes") > 0
    values = {v for (_n, labels), _x in m.items() for _k, v in labels}
    assert not any("secret-project" in v for v in values)


def test_a_workspace_of_another_org_is_not_in_this_org_s_scrape(served):
    served.call("PUT", "/api/workspaces/team-a/quota", json={"gpus": 8})
    long = "/api/v1/orgs/default/workspaces/team-a/clusters/default/api"
    assert served.call("POST", f"{long}/runs", json=run("a", 2)).status_code == 201
    served.step()
    m = served.scrape()
    assert total(m, "astra_workers", workspace="team-a", state="Running") == 1
    assert served.app.state.astra.metrics.exposition("acme").count(b'workspace="team-a"') == 0


def test_reasons_fall_in_their_classes_and_routes_lose_their_base_path():
    assert reason_class("Workspace team-a is at its quota of 8 GPUs") == "quota"
    assert reason_class("Workspace team-a has used its 5000 GPU-hours this month") == "quota"
    assert reason_class("Array runs at most 10 workers at once") == "max_parallel"
    assert reason_class("Waiting in the queue") == "room"
    assert reason_class("Waiting for room: 16 GPUs on one network") == "room"
    assert reason_class("Waiting for run prep to complete (depends on it)") == "dependency"
    assert reason_class("Waiting for its schedule: next at 02:00") == "schedule"
    assert reason_class("Pulling image busybox") == "other"
    assert (
        route_label("/api/v1/orgs/{org}/workspaces/{workspace}/clusters/{cluster}/api/runs/{name}")
        == "/runs/{name}"
    )
    assert route_label("/api/runs") == "/runs"
    assert route_label("/metrics") == "/metrics"
    assert route_label(None) == "unmatched"


def test_the_fast_exposition_gives_the_bytes_of_prometheus_client_s_own(served):
    served.call("PUT", "/api/workspaces/team-a/quota", json={"gpus": 2})
    served.call("POST", "/api/runs", json=run("one", 4))
    served.call("POST", "/api/runs", json=run("sweep", 1, array={"size": 9, "max_parallel": 4}))
    served.call("PUT", "/api/sources/site", json={"status": {}})
    served.call("PUT", "/api/sources/site/status", json={"state": "Ready", "updated_at": 1_000_000.5})
    served.step()
    served.call("GET", "/api/runs/one")
    metrics = served.app.state.astra.metrics
    metrics.record_tick(0.003)
    fast, plain = metrics.exposition("default"), metrics.plain_exposition("default")
    assert fast == plain
    assert b"astra_machine_gpus_free{" in fast and b"astra_api_request_duration_seconds_bucket{" in fast
