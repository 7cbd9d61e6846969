"""The slurm cluster against a REAL local Slurm (scripts/slurm-local-up.sh, `task slurm:up`).

These tests fail (never skip) when the cluster is not up: CI starts it first. They need the
default two nodes (SLURM_LOCAL_NODES=2) for the gang. The time-limit run is submitted when the
module starts and checked by the last test, so Slurm's slow time-limit sweep (about 30 s on top
of the minute) overlaps with the other tests instead of adding to them.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from reconciler.clusters import Conflict, LiveRun, Rejected
from reconciler.clusters.slurm import SlurmCluster

T = TypeVar("T")
ROOT_EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "laptop"
UP_HINT = "run `task slurm:up` (bash scripts/slurm-local-up.sh) as root first"


def _cluster_up() -> str | None:
    """None if the local cluster answers with two idle-or-busy nodes, else what is wrong."""
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=10)
        nodes = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True, timeout=10
        )
    except (FileNotFoundError, subprocess.TimeoutExpired) as exc:
        return f"Slurm's commands are not usable ({exc})"
    if "is UP" not in ping.stdout:
        return f"slurmctld does not answer: {(ping.stdout + ping.stderr).strip()}"
    states = [line.split()[1] for line in nodes.stdout.splitlines() if line.strip()]
    broken = ("down", "drain", "fail", "inval", "unknown", "not_responding", "maint")
    usable = [s for s in states if not any(word in s.lower() for word in broken)]
    if len(usable) < 2:
        return f"need 2 usable nodes (SLURM_LOCAL_NODES=2), sinfo says {states}"
    return None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> SlurmCluster:
    problem = _cluster_up()
    if problem is not None:
        pytest.fail(f"The local Slurm cluster is not up: {problem}; {UP_HINT}", pytrace=False)
    return SlurmCluster.from_url("slurm://debug", state_dir=tmp_path_factory.mktemp("slurm-state"))


def wait_for(
    what: str, fn: Callable[[], T], ok: Callable[[T], bool], timeout: float, every: float = 0.5
) -> T:
    """Poll ``fn`` until ``ok`` holds; fail after ``timeout`` seconds with the last value."""
    deadline = time.monotonic() + timeout
    value = fn()
    while not ok(value):
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:g} s; last: {value!r}", pytrace=False)
        time.sleep(every)
        value = fn()
    return value


def doc(name: str, script: str, **spec: Any) -> dict[str, Any]:
    template = {
        "image": "debian:12",
        "command": "sh",
        "args": ["-c", script],
        **spec.pop("task_template", {}),
    }
    return {"metadata": {"name": name}, "spec": {**spec, "task_template": template}}


def final(cluster: SlurmCluster, name: str, timeout: float) -> LiveRun:
    return wait_for(
        f"run {name} ends", lambda: cluster.get_run(name), lambda r: r is not None and r.final, timeout
    )


#: Jobs of earlier test sessions stay visible for MinJobAge; the tests look only at their own.
SESSION_START = int(time.time())


def squeue_rows() -> list[dict[str, Any]]:
    jobs = json.loads(
        subprocess.run(["squeue", "--json"], capture_output=True, text=True, check=True).stdout
    )["jobs"]
    return [j for j in jobs if j["submit_time"] >= SESSION_START]


def read_env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


@pytest.fixture(scope="module", autouse=True)
def time_limited(cluster: SlurmCluster) -> float:
    """Submitted first: a run of one worker that sleeps past its one-minute limit."""
    cluster.create_run(doc("tl", "sleep 600", task_template={"time_limit_seconds": 60}))
    return time.monotonic()


def test_array_of_6_max_parallel_2(cluster: SlurmCluster, tmp_path: Path):
    script = (
        f"d={tmp_path}; s=$(date +%s.%N); env > $d/env.$ASTRAEUS_ARRAY_TASK_ID; sleep 2; "
        'echo "$s $(date +%s.%N)" > $d/times.$ASTRAEUS_ARRAY_TASK_ID'
    )
    d = doc("sweep", script, array={"size": 6, "max_parallel": 2}, task_template={"restart_policy": "Never"})
    d["spec"]["task_template"]["requested_resources"] = {"gpu_requests": {"count": 1}}
    live = cluster.create_run(d)
    assert live.document == d
    assert live.resource_version == 1

    seen_cap = wait_for(
        "a waiting copy says the array's cap",
        lambda: cluster.workers("sweep"),
        lambda ws: any(w.reason == "Array runs at most 2 workers at once" for w in ws),
        timeout=15,
        every=0.2,
    )
    assert [w.name for w in seen_cap] == [f"sweep-{i}" for i in range(6)]
    done = final(cluster, "sweep", 60)
    assert (done.state, done.reason) == ("Completed", "All 6 workers completed")

    # one Slurm array: every task under one array job id, named after the run, with our comment
    ours = [j for j in squeue_rows() if j["name"] == "sweep" and j["comment"].startswith("astra/v1,")]
    assert len(ours) == 6
    assert len({j["array_job_id"] for j in ours}) == 1
    assert sorted(j["array_task_id"] for j in ours) == list(range(6))

    # never more than 2 at once, from each copy's own start and end
    spans = [tuple(map(float, (tmp_path / f"times.{i}").read_text().split())) for i in range(6)]
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert peak == 2

    for i in range(6):
        env = read_env(tmp_path / f"env.{i}")
        want = {
            "ASTRAEUS_ARRAY_TASK_ID": str(i),
            "ASTRAEUS_ARRAY_SIZE": "6",
            "ASTRAEUS_REPLICA_INDEX": str(i),
            "RANK": str(i),
            "WORLD_SIZE": "6",
            "SLURM_PROCID": str(i),
            "SLURM_NTASKS": "6",
        }
        assert {k: env.get(k) for k in want} == want
        assert [k for k in env if k.startswith("SLURM_ARRAY_")] == []
        assert "MASTER_ADDR" not in env
        assert len(env["CUDA_VISIBLE_DEVICES"].split(",")) == 1

    workers = cluster.workers("sweep")
    assert [(w.name, w.rank, w.state, w.reason, w.exit_code) for w in workers] == [
        (f"sweep-{i}", i, "Completed", "Exited with code 0", 0) for i in range(6)
    ]
    assert all(w.machine in ("vm-n1", "vm-n2") or w.machine for w in workers)
    assert "SLURM_PROCID=3" in cluster.logs("sweep-3") or cluster.logs("sweep-3") == ""


def test_failing_copy_reason_in_the_seeds_words(cluster: SlurmCluster):
    d = doc(
        "flaky", '[ "$RANK" != 1 ] || exit 3', array={"size": 3}, task_template={"restart_policy": "Never"}
    )
    cluster.create_run(d)
    done = final(cluster, "flaky", 30)
    assert done.state == "Failed"
    assert re.fullmatch(
        r"1 of 3 workers failed; the first: Worker flaky-1 failed on \S+: Exited with code 3", done.reason
    ), done.reason
    by_name = {w.name: w for w in cluster.workers("flaky")}
    assert (by_name["flaky-1"].state, by_name["flaky-1"].exit_code) == ("Failed", 3)
    assert by_name["flaky-0"].state == by_name["flaky-2"].state == "Completed"


def test_failed_worker_is_resubmitted_under_the_backoff(cluster: SlurmCluster, tmp_path: Path):
    marker = tmp_path / "tried"
    d = doc("retry", f"[ -e {marker} ] && exit 0; touch {marker}; exit 1")  # OnFailure: the default
    cluster.create_run(d)
    waiting = wait_for(
        "the failure is judged and resubmitted",
        lambda: cluster.workers("retry")[0],
        lambda w: w.restarts == 1,
        timeout=20,
    )
    assert waiting.state == "Pending"
    assert waiting.reason == "Exited with code 1; restart 1 of 10 in 10 s"
    t0 = time.monotonic()
    done = final(cluster, "retry", 40)
    assert (done.state, done.reason) == ("Completed", "All 1 workers completed")
    assert time.monotonic() - t0 > 3  # it waited for --begin, not resubmitted at once
    assert cluster.workers("retry")[0].restarts == 1


def test_gang_of_two_machines_env(cluster: SlurmCluster, tmp_path: Path):
    d = doc("gang", f"env > {tmp_path}/env.$RANK")
    d["spec"]["task_template"]["requested_resources"] = {"machines": 2, "gpu_requests": {"count": 2}}
    cluster.create_run(d)
    done = final(cluster, "gang", 30)
    assert (done.state, done.reason) == ("Completed", "All 2 workers completed")
    envs = [read_env(tmp_path / f"env.{r}") for r in range(2)]
    for rank, env in enumerate(envs):
        want = {
            "RANK": str(rank),
            "WORLD_SIZE": "2",
            "SLURM_PROCID": str(rank),
            "SLURM_NTASKS": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29500",
        }
        assert {k: env.get(k) for k in want} == want
        assert len(env["CUDA_VISIBLE_DEVICES"].split(",")) == 1
    assert envs[0]["SLURMD_NODENAME"] != envs[1]["SLURMD_NODENAME"]
    workers = cluster.workers("gang")
    assert [(w.name, w.rank, w.state) for w in workers] == [
        ("gang-0", 0, "Completed"),
        ("gang-1", 1, "Completed"),
    ]
    assert {w.machine for w in workers} == {"vm-n1", "vm-n2"}


def test_max_parallel_updated_in_place(cluster: SlurmCluster, tmp_path: Path):
    # each copy lasts 5 s: the array still has copies waiting when the updates and the check's
    # ``squeue --json`` are done, though a controller holding tens of thousands of finished jobs
    # takes seconds to answer each (with 2 s copies, such a controller saw the array end first)
    script = f's=$(date +%s.%N); sleep 5; echo "$s $(date +%s.%N)" > {tmp_path}/times.$RANK'
    d = doc("throttle", script, array={"size": 6, "max_parallel": 1})
    live = cluster.create_run(d)
    wait_for("the first copy runs", lambda: cluster.get_run("throttle"), lambda r: r.workers_running == 1, 15)

    with pytest.raises(Conflict):
        cluster.update_run("throttle", d, resource_version=live.resource_version + 5)
    changed_args = json.loads(json.dumps(d))
    changed_args["spec"]["task_template"]["args"] = ["-c", "true"]
    with pytest.raises(Rejected) as refused:
        cluster.update_run("throttle", changed_args, live.resource_version)
    assert [e["path"] for e in refused.value.errors] == ["spec.task_template.args"]
    assert "replace the run" in str(refused.value)

    wider = json.loads(json.dumps(d))
    wider["spec"]["array"]["max_parallel"] = 3
    updated = cluster.update_run("throttle", wider, live.resource_version)
    assert updated.resource_version == live.resource_version + 1
    assert updated.document["spec"]["array"]["max_parallel"] == 3
    rows = [j for j in squeue_rows() if j["name"] == "throttle"]
    assert len({j["array_job_id"] for j in rows}) == 1  # the same Slurm array, not a new one
    assert {j["array_max_tasks"] for j in rows if j["job_state"] in ("PENDING", "RUNNING")} == {3}

    final(cluster, "throttle", 40)
    spans = [tuple(map(float, (tmp_path / f"times.{i}").read_text().split())) for i in range(6)]
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert peak == 3


def test_delete_cancels_the_jobs(cluster: SlurmCluster):
    cluster.create_run(doc("doomed", "sleep 300"))
    wait_for("it runs", lambda: cluster.get_run("doomed"), lambda r: r.state == "Running", 15)
    job_ids = [j["job_id"] for j in squeue_rows() if j["name"] == "doomed" and j["job_state"] == "RUNNING"]
    cluster.delete_run("doomed")
    assert cluster.get_run("doomed") is None
    assert "doomed" not in [r.name for r in cluster.list_runs()]
    # a graceful stop: the worker is sent its stop signal (TERM) and ends of it, which Slurm
    # records as FAILED (a signal's death); one still alive after the grace is cancelled
    wait_for(
        "Slurm ends it",
        lambda: [j["job_state"] for j in squeue_rows() if j["job_id"] in job_ids],
        lambda states: states and all(s in ("CANCELLED", "FAILED", "COMPLETING") for s in states),
        15,
    )


def test_refused_fields_name_their_path(cluster: SlurmCluster):
    d = doc("nope", "true", network={"interconnect": "infiniband"})
    with pytest.raises(Rejected) as refused:
        cluster.create_run(d)
    assert [e["path"] for e in refused.value.errors] == ["spec.network.interconnect"]
    assert cluster.get_run("nope") is None


def test_time_limit_stops_the_worker(cluster: SlurmCluster, time_limited: float):
    # Slurm sweeps time limits about every 30 s: a 1-minute limit ends after 60-95 s.
    left = max(5.0, 150 - (time.monotonic() - time_limited))
    done = final(cluster, "tl", left)
    assert done.state == "Failed"
    assert re.fullmatch(r"Worker tl-0 failed on \S+: Stopped at its time limit of 1m", done.reason), (
        done.reason
    )
    worker = cluster.workers("tl")[0]
    assert (worker.state, worker.reason, worker.restarts) == ("Failed", "Stopped at its time limit of 1m", 0)
