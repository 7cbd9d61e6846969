"""Graceful stops on the REAL local Slurm cluster (``stopping``): a delete sends the run's
``stop_signal`` and gives it ``stop_grace_seconds`` before a plain ``scancel``; a worker Slurm
requeues (preemption's path: the shared cluster has preemption off, so an administrator's
``scontrol requeue`` stands in for it) gets TERM and the cluster's KillWait, comes back with
``ASTRAEUS_ATTEMPT=1`` and ``ASTRAEUS_RESTART_REASON=Preempted``, its restart budget untouched.
A worker that ends failed on its early signal before its time limit is stopped by its time limit
(never restarted). What each worker did is measured with the files it writes and Slurm's states,
not with sleeps."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from reconciler.clusters.slurm import SlurmCluster
from reconciler.clusters.slurm.decode import TaskObs
from reconciler.clusters.slurm.observe import policy_of
from reconciler.clusters.slurm.policy import Unit, after_early_signal, judge
from reconciler.runspec.parse import parse_run

from .test_integration import _cluster_up, doc, final, wait_for


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch) -> SlurmCluster:
    problem = _cluster_up()
    if problem is not None:
        pytest.fail(f"The local Slurm cluster is not up: {problem}", pytrace=False)
    monkeypatch.chdir(tmp_path)  # nothing is written into the checkout
    return SlurmCluster.from_url("slurm://debug", state_dir=tmp_path / "state")


def _state(job: int) -> str:
    out = subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", str(job), "-o", "%T"], capture_output=True, text=True
    )
    return out.stdout.strip()


def _job(cluster: SlurmCluster, name: str) -> int:
    return int(cluster.records.load(name)["attempts"][0]["job_id"])


def test_delete_sends_the_stop_signal_and_waits_the_grace(cluster: SlurmCluster, tmp_path: Path):
    d = tmp_path
    script = (
        f"trap 'date +%s.%N > {d}/got; sleep 2; date +%s.%N > {d}/ckpt; exit 0' USR1; "
        f"date > {d}/up; sleep 300 & wait"
    )
    cluster.create_run(doc("gs", script, task_template={"stop_signal": "USR1", "stop_grace_seconds": 20}))
    job = _job(cluster, "gs")
    wait_for("the worker runs", lambda: (d / "up").exists(), bool, 60)
    cluster.delete_run("gs")
    # the delete returned once the worker had ended by itself, its checkpoint written
    assert float((d / "ckpt").read_text()) - float((d / "got").read_text()) >= 2
    assert _state(job) not in ("RUNNING", "PENDING", "COMPLETING")
    assert cluster.get_run("gs") is None


def test_a_worker_that_ignores_the_signal_is_ended_after_its_grace(cluster: SlurmCluster, tmp_path: Path):
    d = tmp_path
    script = f"trap 'date +%s.%N > {d}/got' TERM; date > {d}/up; while :; do sleep 0.2; done"
    cluster.create_run(doc("gi", script, task_template={"stop_grace_seconds": 3}))
    job = _job(cluster, "gi")
    wait_for("the worker runs", lambda: (d / "up").exists(), bool, 60)
    started = time.monotonic()
    cluster.delete_run("gi")
    took = time.monotonic() - started
    assert (d / "got").exists()  # it was sent TERM first ...
    assert took >= 3  # ... given its grace, then cancelled
    wait_for("Slurm ends it", lambda: _state(job), lambda s: s in ("CANCELLED", ""), 30)


def test_a_requeued_worker_comes_back_with_its_attempt_and_reason(cluster: SlurmCluster, tmp_path: Path):
    d = tmp_path
    script = (
        f'echo "$ASTRAEUS_ATTEMPT ${{ASTRAEUS_RESTART_REASON:-none}}" >> {d}/starts; '
        f"trap 'date +%s.%N > {d}/term.$ASTRAEUS_ATTEMPT; sleep 2; "
        f"date +%s.%N > {d}/ckpt.$ASTRAEUS_ATTEMPT; exit 0' TERM; "
        'if [ "$ASTRAEUS_ATTEMPT" = 0 ]; then sleep 300 & wait; fi'
    )
    cluster.create_run(doc("pre", script))
    job = _job(cluster, "pre")
    wait_for("the first attempt runs", lambda: (d / "starts").exists(), bool, 60)
    subprocess.run(["scontrol", "requeue", str(job)], check=True)
    wait_for("Slurm requeues it", lambda: _state(job), lambda s: s == "PENDING", 30)
    # Slurm holds a requeued job back for two minutes; the test does not wait them out
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True)
    assert final(cluster, "pre", 90).state == "Completed"
    assert (d / "starts").read_text().splitlines() == ["0 none", "1 Preempted"]
    assert float((d / "ckpt.0").read_text()) - float((d / "term.0").read_text()) >= 2  # its grace
    assert [w.restarts for w in cluster.workers("pre")] == [0]  # the budget is untouched
    cluster.delete_run("pre")


def test_the_job_is_told_how_to_stop():
    from reconciler.clusters.slurm.mapping import to_submission

    run = parse_run(
        doc(
            "t",
            "true",
            task_template={"time_limit_seconds": 600, "stop_signal": "USR1", "stop_grace_seconds": 90},
        )
    )
    sub = to_submission(run, nonce="n", log_dir="/logs")
    assert "--requeue" in sub.options and "--signal=B:USR1@90" in sub.options
    # a template that says nothing of its stop keeps Slurm's own at its limit (TERM, KillWait)
    quiet = to_submission(
        parse_run(doc("q", "true", task_template={"time_limit_seconds": 600})), nonce="n", log_dir="/l"
    )
    assert "--requeue" in quiet.options and not any(o.startswith("--signal") for o in quiet.options)
    untimed = to_submission(parse_run(doc("u", "true")), nonce="n", log_dir="/logs")
    assert "--requeue" in untimed.options
    assert not any(o.startswith("--signal") for o in untimed.options)  # no time limit: no early signal


def _ended(state: str, reason: str, code: int, ran: float) -> TaskObs:
    kind = "ok" if state == "COMPLETED" else "failed"
    shown = "Completed" if state == "COMPLETED" else "Failed"
    return TaskObs(shown, reason, kind, code, ("vm-n1",), 1000.0, 1000.0 + ran, state)


def test_a_job_that_fails_after_its_early_signal_is_stopped_by_its_time_limit():
    run = parse_run(doc("t", "true", task_template={"time_limit_seconds": 600, "stop_grace_seconds": 90}))
    template, policy = run.spec.task_template, policy_of(run)
    # the early TERM is due at 510 s, and Slurm may send it a minute sooner: from 450 s on
    late = after_early_signal(_ended("FAILED", "Exited with code 143", 143, 455), template)
    assert (late.end_kind, late.reason) == (
        "timeout",
        "Stopped at its time limit of 10m (exited with code 143 after its early TERM)",
    )
    v = judge(policy, Unit(0, late), now=2000)
    assert (v.state, v.final, v.fails_run, v.resubmit) == ("Failed", True, True, None)  # not restarted
    killed = after_early_signal(_ended("FAILED", "Killed by signal 15", 0, 520), template)
    assert killed.reason == "Stopped at its time limit of 10m (killed by signal 15 after its early TERM)"
    early = _ended("FAILED", "Exited with code 1", 1, 449)  # before the signal could come: a failure
    assert after_early_signal(early, template) == early
    assert judge(policy, Unit(0, early), now=2000).resubmit is not None
    done = _ended("COMPLETED", "Exited with code 0", 0, 520)  # Slurm's afterok counts it completed too
    assert after_early_signal(done, template) == done


def test_without_an_early_signal_or_time_before_it_a_job_ends_as_its_exit_says():
    quiet = parse_run(doc("q", "true", task_template={"time_limit_seconds": 600})).spec.task_template
    failed = _ended("FAILED", "Exited with code 143", 143, 590)
    assert after_early_signal(failed, quiet) == failed  # no --signal: Slurm's TIMEOUT tells
    short = parse_run(
        doc("s", "true", task_template={"time_limit_seconds": 60, "stop_grace_seconds": 30})
    ).spec.task_template
    assert after_early_signal(_ended("FAILED", "Exited with code 1", 1, 5), short).end_kind == "failed"


def test_on_slurm_a_worker_ending_on_its_early_signal_is_stopped_by_its_time_limit(
    cluster: SlurmCluster, tmp_path: Path
):
    d = tmp_path
    script = (
        f'echo "$ASTRAEUS_ATTEMPT" >> {d}/starts; '
        f"trap 'date +%s > {d}/got; sleep 1; exit 143' TERM; sleep 600 & wait"
    )
    template = {"time_limit_seconds": 120, "stop_grace_seconds": 30}  # OnFailure, as the seeds
    cluster.create_run(doc("tl", script, task_template=template))
    run = final(cluster, "tl", 200)
    machine = cluster.workers("tl")[0].machine
    assert (run.state, run.reason) == (
        "Failed",
        f"Worker tl-0 failed on {machine}: Stopped at its time limit of 2m "
        "(exited with code 143 after its early TERM)",
    )
    assert (d / "got").exists()  # it had its signal before the limit ...
    assert (d / "starts").read_text().split() == ["0"]  # ... and was not restarted
    assert len(cluster.records.load("tl")["attempts"]) == 1
    cluster.delete_run("tl")
