"""A first apply on a REAL local Slurm cluster (`task slurm:up`): every new run submitted, the ones
Slurm cannot take failed in words, and the queue read once for the whole apply, not after each
``sbatch`` (a first apply of a team's runs was 30x slower than a shell loop of ``sbatch``)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from .test_integration import UP_HINT, _cluster_up

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
    (shim / "squeue").write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexec {real} "$@"\n')
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
        for name in names:
            live = _astra(env, "get", "runs", name, "--server", "slurm://debug")
            assert name in live.stdout and live.returncode == 0, live.stdout + live.stderr
    finally:
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
    monkeypatch.setattr(cluster.commands, "squeue", lambda: pytest.fail("a create read the queue"))
    documents = [
        {"metadata": {"name": f"r{i}"}, "spec": {"task_template": {"image": "i", "command": "true"}}}
        for i in range(5)
    ]
    made = cluster.create_runs([*documents, documents[0]])
    assert [type(m).__name__ if m else None for m in made] == [None, None, "Rejected", None, None, "Conflict"]
    assert "Requested node configuration is not available" in str(made[2])
    assert isinstance(made[5], Conflict) and "run r0 already exists" in str(made[5])
    assert sorted(cluster.records.names()) == ["r0", "r1", "r3", "r4"]
