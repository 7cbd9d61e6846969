"""A first apply on a REAL local Slurm cluster (`task slurm:up`): every new run submitted, the ones
Slurm cannot take failed in words, and the queue read once for the whole apply, not after each
``sbatch`` (a first apply of a team's runs was 30x slower than a shell loop of ``sbatch``)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from .test_integration import UP_HINT, _cluster_up, wait_for

GOOD = """metadata: {{name: {name}}}
spec:
  task_template:
    image: debian:12
    command: sleep
    args: ["300"]
    time_limit_seconds: 10m
    requested_resources: {{cpu_cores: 1, memory_bytes: 64Mi}}
"""


@pytest.fixture
def counted(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose ``squeue`` is Slurm's own, each call counted in a file."""
    problem = _cluster_up()
    if problem is not None:
        pytest.fail(f"The local Slurm cluster is not up: {problem}; {UP_HINT}", pytrace=False)
    shim, calls = tmp_path / "bin", tmp_path / "squeue.calls"
    shim.mkdir()
    real = subprocess.run(["which", "squeue"], capture_output=True, text=True, check=True).stdout.strip()
    # with SQUEUE_EVERY_JOB set, the names asked for are dropped: every job is read (the plain way)
    (shim / "squeue").write_text(
        "#!/bin/bash\n"
        f'echo "$@" >> {calls}\n'
        'args=(); while [ $# -gt 0 ]; do if [ -n "$SQUEUE_EVERY_JOB" ] && [ "$1" = --name ]; '
        'then shift 2; else args+=("$1"); shift; fi; done\n'
        f'exec {real} "${{args[@]}}"\n'
    )
    (shim / "squeue").chmod(stat.S_IRWXU)
    env = {
        **os.environ,
        "PATH": f"{shim}:{os.environ['PATH']}",
        "ASTRA_HOME": str(tmp_path / "home"),
    }
    return env, calls


def _astra(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler.cli", *args], env=env, capture_output=True, text=True, check=False
    )


def test_first_apply_submits_every_run_and_reads_the_queue_once(tmp_path: Path, counted):
    env, calls = counted
    runs = tmp_path / "runs"
    runs.mkdir()
    names = [f"bc-{i}" for i in range(12)]
    for name in names:
        (runs / f"{name}.yaml").write_text(GOOD.format(name=name))
    try:
        done = _astra(env, "apply", "-f", str(runs), "--server", "slurm://debug", "--yes")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Apply complete: 12 created, 0 configured" in done.stdout
        # nothing of this source was on the cluster: its plan read no queue, and the creates none
        assert not calls.exists()

        again = _astra(env, "plan", "-f", str(runs), "--server", "slurm://debug")
        assert "Plan: 0 to create, 0 to update, 0 to replace, 0 to delete." in again.stdout, again.stdout
        assert len(calls.read_text().splitlines()) == 1  # twelve runs observed in one reading
        # one reading of the source's own jobs only: the controller's others are not read
        assert f"--name {','.join(sorted(names))}" in calls.read_text()
        for name in names:
            live = _astra(env, "get", "runs", name, "--server", "slurm://debug")
            assert name in live.stdout and live.returncode == 0, live.stdout + live.stderr
    finally:
        _astra(env, "delete", *names, "--server", "slurm://debug", "--yes")


def test_reading_only_the_runs_jobs_observes_what_reading_every_job_does(tmp_path: Path, counted):
    """``squeue --name`` of the source's runs, beside a job of another name (a colleague's) and
    one named as a run but not astra's: ``get runs`` and the plan say the same as when every job
    the controller knows is read."""
    env, _ = counted
    runs = tmp_path / "runs"
    runs.mkdir()
    names = ["nq-a", "nq-b"]
    for name in names:
        (runs / f"{name}.yaml").write_text(GOOD.format(name=name))
    others = []
    try:
        done = _astra(env, "apply", "-f", str(runs), "--server", "slurm://debug", "--yes")
        assert done.returncode == 0, done.stdout + done.stderr
        for job_name in ("colleague", "nq-a"):
            made = subprocess.run(
                ["sbatch", "--parsable", "--hold", f"--job-name={job_name}", "--wrap", "sleep 300"],
                capture_output=True,
                text=True,
                check=True,
            )
            others.append(made.stdout.strip().split(";")[0])

        def listed_states() -> list[str]:
            listed = _astra(env, "get", "runs", "--server", "slurm://debug", "-o", "json")
            return [r["state"] for r in json.loads(listed.stdout)] if listed.returncode == 0 else []

        wait_for("both run", listed_states, lambda states: states == ["Running", "Running"], 60)
        said = []
        for every in ("", "1"):
            env_now = {**env, "SQUEUE_EVERY_JOB": every}
            listed = _astra(env_now, "get", "runs", "--server", "slurm://debug", "-o", "json")
            planned = _astra(env_now, "plan", "-f", str(runs), "--server", "slurm://debug")
            assert listed.returncode == 0 and planned.returncode == 0, listed.stderr + planned.stderr
            said.append((json.loads(listed.stdout), planned.stdout))
        assert said[0] == said[1]
        assert sorted(r["name"] for r in said[0][0]) == names
    finally:
        subprocess.run(["scancel", *others], check=False)
        _astra(env, "delete", *names, "--server", "slurm://debug", "--yes")


def test_a_refused_job_in_a_batch_is_that_run_s_answer_and_the_others_are_made(tmp_path: Path, monkeypatch):
    """sbatch faked: the third of five refuses; the batch goes on, in order, nothing observed."""
    from reconciler.clusters import Conflict, Rejected
    from reconciler.clusters.slurm import SlurmCluster

    cluster = SlurmCluster("debug", state_dir=tmp_path, images="host")
    ids = iter(range(500, 600))

    def sbatch(script: str, extra: list[str]) -> int:
        if "--job-name=r2\n" in script:
            raise Rejected("Slurm refused the job: Requested node configuration is not available")
        return next(ids)

    monkeypatch.setattr(cluster, "_sbatch", sbatch)
    monkeypatch.setattr(cluster.commands, "squeue_text", lambda *a: pytest.fail("a create read the queue"))
    documents = [
        {"metadata": {"name": f"r{i}"}, "spec": {"task_template": {"image": "i", "command": "true"}}}
        for i in range(5)
    ]
    made = cluster.create_runs([*documents, documents[0]])
    assert [type(m).__name__ if m else None for m in made] == [None, None, "Rejected", None, None, "Conflict"]
    assert "Requested node configuration is not available" in str(made[2])
    assert isinstance(made[5], Conflict) and "run r0 already exists" in str(made[5])
    assert sorted(cluster.records.names()) == ["r0", "r1", "r3", "r4"]
