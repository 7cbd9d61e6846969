"""Worker groups (``spec.task_groups``) against the REAL local Slurm (scripts/slurm-local-up.sh).

A ``start_after`` chain is one job per group with ``--dependency=after:<job id>``; a gang of
groups without ``start_after`` is one heterogeneous job. Fails (never skips) when the cluster is
not up, as the other Slurm tests do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.clusters import Rejected
from reconciler.clusters.slurm import SlurmCluster

from .test_integration import UP_HINT, _cluster_up, final, read_env, squeue_rows, wait_for


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> SlurmCluster:
    problem = _cluster_up()
    if problem is not None:
        pytest.fail(f"The local Slurm cluster is not up: {problem}; {UP_HINT}", pytrace=False)
    return SlurmCluster.from_url("slurm://debug", state_dir=tmp_path_factory.mktemp("slurm-groups"))


def group(name: str, script: str, replicas: int = 1, after: str | None = None, **template: Any) -> dict:
    g: dict[str, Any] = {
        "name": name,
        "replicas": replicas,
        "task_template": {"image": "debian:12", "command": "sh", "args": ["-c", script], **template},
    }
    if after:
        g["start_after"] = after
    return g


def record_env(d: Path, extra: str = "") -> str:
    """Each worker writes its start time and its environment, keyed by RANK, then sleeps a bit."""
    return f"date +%s.%N > {d}/start.$RANK; env > {d}/env.$RANK; {extra}sleep 2"


def jobs_named(name: str, cluster: SlurmCluster) -> list[dict[str, Any]]:
    """The jobs of this cluster's run ``name`` (other test sessions share the Slurm cluster and
    the run names): by the submission nonces its record holds, which each job's comment carries."""
    with cluster.records.locked():
        nonces = {a["nonce"] for a in cluster.records.load(name)["attempts"]}
    ours = (
        j
        for j in squeue_rows()
        if j["name"] == name and any(f"sub={n}" in (j.get("comment") or "") for n in nonces)
    )
    return sorted(ours, key=lambda j: j["job_id"])


def test_start_after_chain_is_one_job_per_group_with_a_dependency(cluster: SlurmCluster, tmp_path: Path):
    d = {
        "metadata": {"name": "pt"},
        "spec": {
            "task_groups": [
                group("ps", record_env(tmp_path), restart_policy="Never"),
                group(
                    "trainer",
                    record_env(tmp_path),
                    replicas=2,
                    after="ps",
                    restart_policy="Never",
                    requested_resources={"gpu_requests": {"count": 1}},
                ),
            ]
        },
    }
    live = cluster.create_run(d)
    assert live.document == d
    done = final(cluster, "pt", 60)
    assert (done.state, done.reason) == ("Completed", "All 3 workers completed")

    workers = cluster.workers("pt")
    assert [(w.name, w.rank, w.state, w.gpus) for w in workers] == [
        ("pt-ps-0", 0, "Completed", 0),
        ("pt-trainer-0", 1, "Completed", 1),
        ("pt-trainer-1", 2, "Completed", 1),
    ]
    envs = [read_env(tmp_path / f"env.{r}") for r in range(3)]
    for rank, env in enumerate(envs):
        want = {
            "RANK": str(rank),
            "WORLD_SIZE": "3",
            "SLURM_PROCID": str(rank),
            "SLURM_NTASKS": "3",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29500",
        }
        assert {k: env.get(k) for k in want} == want
    assert len(envs[1]["CUDA_VISIBLE_DEVICES"].split(",")) == 1  # the template's whole ask per task

    jobs = jobs_named("pt", cluster)
    assert len(jobs) == 2  # one job per group, not one per worker
    ps_job, trainer_job = jobs
    assert trainer_job["start_time"] >= ps_job["start_time"]
    starts = [float((tmp_path / f"start.{r}").read_text()) for r in range(3)]
    assert min(starts[1:]) >= starts[0]  # the trainers started after ps started
    assert "ps" in cluster.logs("pt-ps-0") or cluster.logs("pt-ps-0") == ""


def test_restart_job_resubmits_every_group(cluster: SlurmCluster, tmp_path: Path):
    marker = tmp_path / "tried"
    fail_once = f"[ -e {marker} ] || {{ touch {marker}; exit 3; }}; "
    d = {
        "metadata": {"name": "rj"},
        "spec": {
            # Groups of 2 workers default to a gang: on_failure RestartJob.
            "task_groups": [
                group("ps", record_env(tmp_path, fail_once)),
                group("trainer", record_env(tmp_path, "sleep 3; "), after="ps"),
            ]
        },
    }
    cluster.create_run(d)
    waiting = wait_for(
        "the failure restarts every group",
        lambda: cluster.workers("rj"),
        lambda ws: all(w.restarts == 1 for w in ws),
        timeout=30,
    )
    assert waiting[0].reason == "Exited with code 3; restart 1 of 10 in 10 s"
    done = final(cluster, "rj", 60)
    assert (done.state, done.reason) == ("Completed", "All 2 workers completed")
    assert [(w.name, w.state, w.restarts) for w in cluster.workers("rj")] == [
        ("rj-ps-0", "Completed", 1),
        ("rj-trainer-0", "Completed", 1),
    ]
    jobs = jobs_named("rj", cluster)
    assert len(jobs) == 4  # two generations of two jobs
    # the first trainer was stopped (its stop signal: Slurm records the signal's end as FAILED),
    # then resubmitted
    assert jobs[1]["job_state"] in ("CANCELLED", "FAILED")
    assert [j["job_state"] for j in jobs[2:]] == ["COMPLETED", "COMPLETED"]
    env = read_env(tmp_path / "env.1")
    assert (env["RANK"], env["WORLD_SIZE"], env["MASTER_ADDR"]) == ("1", "2", "127.0.0.1")


def test_gang_of_groups_without_start_after_is_one_hetjob(cluster: SlurmCluster, tmp_path: Path):
    d = {
        "metadata": {"name": "het"},
        "spec": {
            "start": "Gang",
            "task_groups": [
                group("engine", record_env(tmp_path), restart_policy="Never"),
                group(
                    "client",
                    record_env(tmp_path),
                    replicas=2,
                    restart_policy="Never",
                    requested_resources={"gpu_requests": {"count": 2}},
                ),
            ],
        },
    }
    cluster.create_run(d)
    done = final(cluster, "het", 40)
    assert (done.state, done.reason) == ("Completed", "All 3 workers completed")
    jobs = jobs_named("het", cluster)
    assert len(jobs) == 2 and {j["het_job_id"] for j in jobs} == {jobs[0]["job_id"]}
    assert [j["het_job_offset"] for j in jobs] == [0, 1]
    assert jobs[0]["start_time"] == jobs[1]["start_time"]  # allocated and started together
    envs = [read_env(tmp_path / f"env.{r}") for r in range(3)]
    for rank, env in enumerate(envs):
        assert (env["RANK"], env["WORLD_SIZE"], env["SLURM_PROCID"], env["SLURM_NTASKS"]) == (
            str(rank),
            "3",
            str(rank),
            "3",
        )
        assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", "29500")
    assert len(envs[2]["CUDA_VISIBLE_DEVICES"].split(",")) == 2
    assert [w.name for w in cluster.workers("het")] == ["het-engine-0", "het-client-0", "het-client-1"]


def test_groups_change_nothing_in_place_and_delete_cancels_every_job(cluster: SlurmCluster):
    d = {
        "metadata": {"name": "gone"},
        "spec": {"task_groups": [group("a", "sleep 300"), group("b", "sleep 300", after="a")]},
    }
    live = cluster.create_run(d)
    wait_for("both run", lambda: cluster.get_run("gone"), lambda r: r.workers_running == 2, 60)
    changed = json.loads(json.dumps(d))
    changed["spec"]["task_groups"][1]["replicas"] = 3
    with pytest.raises(Rejected) as refused:
        cluster.update_run("gone", changed, live.resource_version)
    assert [e["path"] for e in refused.value.errors] == ["spec.task_groups"]
    assert "replace the run" in str(refused.value)
    ids = [j["job_id"] for j in jobs_named("gone", cluster)]
    assert len(ids) == 2
    cluster.delete_run("gone")
    wait_for(
        "Slurm ends every group's job (stopped by their stop signal, or cancelled)",
        lambda: [j["job_state"] for j in squeue_rows() if j["job_id"] in ids],
        lambda states: len(states) == 2 and all(s in ("CANCELLED", "FAILED", "COMPLETING") for s in states),
        15,
    )
