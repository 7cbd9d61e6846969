"""One server, several local clusters (issue 17): ``astra server --inventory NAME=FILE``, the
``clusters/{cluster}`` part of a workspace's path picks one, each with its own machines, runs
and quotas."""

from __future__ import annotations

import pytest

from reconciler.controlplane.api import create_app
from reconciler.controlplane.engine import Engine
from reconciler.controlplane.executor import ProcessExecutor
from reconciler.controlplane.fleet import cluster_files
from reconciler.controlplane.inventory import load_inventory
from reconciler.runspec.vocabulary import DRIVES_NEED_SANDBOX

from .conftest import TOKEN, Client, LiveServer
from .test_api import tiny

BIG = "machines:\n  - {name: big-1, gpus: 16, cpu_cores: 64, memory_bytes: 512Gi}\n"


def on(cluster: str, workspace: str = "default") -> str:
    return f"/api/v1/orgs/default/workspaces/{workspace}/clusters/{cluster}/api"


def test_inventory_values_name_clusters_and_a_bare_file_is_the_default():
    assert cluster_files(["a.yaml", "gpu2=b.yaml"]) == {"default": "a.yaml", "gpu2": "b.yaml"}
    # a path whose '=' comes after a '/' is a file of the default cluster
    assert cluster_files(["gpu2=b.yaml", "./x=y.yaml"]) == {"gpu2": "b.yaml", "default": "./x=y.yaml"}
    with pytest.raises(ValueError, match="names cluster gpu2 twice"):
        cluster_files(["gpu2=a", "gpu2=b"])
    with pytest.raises(ValueError, match="'GPU' is not a cluster's name"):
        cluster_files(["GPU=a"])


@pytest.fixture
def two(plane, tmp_path):
    inventory = load_inventory({"machines": [{"name": "big-1", "gpus": 16, "cpu_cores": 64}]})
    executor = ProcessExecutor(tmp_path, cwd=tmp_path)
    gpu2 = Engine(plane.store, inventory, executor, plane.clock.now(), "gpu2")
    client = Client(plane)
    client.app = create_app(plane.engine, TOKEN, plane.clock, clusters={"gpu2": gpu2})
    yield client, gpu2
    executor.shutdown()


def test_each_cluster_has_its_own_machines_and_runs(two, plane):
    client, gpu2 = two
    assert [m["name"] for m in client.get(f"{on('gpu2')}/machines").json()["items"]] == ["big-1"]
    assert "big-1" not in {m["name"] for m in client.get("/api/machines").json()["items"]}
    assert client.post(f"{on('gpu2')}/runs", json=tiny("train")).status_code == 201
    assert [r["metadata"]["name"] for r in client.get(f"{on('gpu2')}/runs").json()["items"]] == ["train"]
    assert client.get("/api/runs").json()["items"] == []
    assert client.post("/api/runs", json=tiny("train")).status_code == 201  # its own name there
    gpu2.step(plane.clock.now())
    worker = client.get(f"{on('gpu2')}/runs/train/workers").json()["items"][0]
    assert worker["machine"] == "big-1"


def test_a_quota_is_per_cluster(two):
    client, _ = two
    assert client.put(f"{on('gpu2')}/workspaces/default/quota", json={"gpus": 4}).status_code == 200
    assert client.get(f"{on('gpu2')}/workspaces/default").json()["quota"]["gpus"] == 4
    assert client.get("/api/workspaces/default").json()["quota"]["gpus"] is None


def test_a_drive_is_its_workspace_s_on_every_cluster_and_each_cluster_holds_it_without_a_sandbox(two, plane):
    client, gpu2 = two
    assert client.post("/api/drives", json={"name": "results", "path": str(plane.home)}).status_code == 201
    assert [d["name"] for d in client.get(f"{on('gpu2')}/drives").json()["items"]] == ["results"]
    run = tiny("sweep")
    run["spec"]["task_template"]["datavolume_refs"] = [{"name": "results", "mount_path": "/results"}]
    assert client.post(f"{on('gpu2')}/runs", json=run).status_code == 201
    gpu2.step(plane.clock.now())
    # gpu2's executor has no sandbox (its own, as every cluster's): the run waits, with the reason
    status = client.get(f"{on('gpu2')}/runs/sweep").json()["status"]
    assert (status["state"], status["reason"]) == ("Pending", DRIVES_NEED_SANDBOX)
    assert client.get("/api/drives/results").json()["used_by"] == ["sweep on cluster gpu2"]
    assert client.get(f"{on('gpu2')}/drives/results").json()["used_by"] == ["sweep"]
    refused = client.delete("/api/drives/results")
    assert refused.status_code == 409 and "sweep on cluster gpu2" in refused.json()["detail"]


def test_a_cluster_the_server_has_not_is_403_naming_those_it_has(two):
    client, _ = two
    r = client.get(f"{on('nowhere')}/runs")
    assert (r.status_code, r.json()) == (
        403,
        {"detail": "no cluster named nowhere on this server (it has default, gpu2)"},
    )


def test_a_live_server_serves_each_inventory_under_its_cluster(tmp_path):
    (tmp_path / "work").mkdir()
    (tmp_path / "big.yaml").write_text(BIG)
    server = LiveServer(
        tmp_path / "home", tmp_path / "work", args=("--inventory", f"gpu2={tmp_path / 'big.yaml'}")
    ).start()
    try:
        got = server.api("GET", on("gpu2").removeprefix("/api") + "/machines").json()["items"]
        assert [(m["name"], m["gpus"]) for m in got] == [("big-1", 16)]
        assert "big-1" not in {m["name"] for m in server.api("GET", "/machines").json()["items"]}
    finally:
        server.stop()
