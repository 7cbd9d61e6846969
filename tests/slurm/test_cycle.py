"""The whole plan/apply cycle through ``astra … --server slurm://`` against the REAL local Slurm.

plan, apply, a no-op plan, ``max_parallel`` updated in place (on a running array), a replace, and
prune: the same commands and words as on the embedded control plane. Fails (never skips) when the
local cluster is not up, as the other Slurm tests do.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from reconciler.cli.app import run
from reconciler.clusters.slurm import SlurmCluster

from .test_integration import UP_HINT, _cluster_up, squeue_rows, wait_for

SWEEP = """\
metadata: {{name: cycle-sweep}}
spec:
  array: {{size: 4, max_parallel: {cap}}}
  task_template:
    image: debian:12
    command: sh
    args: [-c, "sleep 4"]
    restart_policy: Never
"""

ONE = """\
metadata: {{name: cycle-one}}
spec:
  task_template:
    image: debian:12
    command: sh
    args: [-c, "{script}"]
    restart_policy: Never
"""


@pytest.fixture
def astra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    problem = _cluster_up()
    if problem is not None:
        pytest.fail(f"The local Slurm cluster is not up: {problem}; {UP_HINT}", pytrace=False)
    monkeypatch.setenv("ASTRA_SLURM_STATE", str(tmp_path / "slurm-state"))
    monkeypatch.chdir(tmp_path)
    common = ["--server", "slurm://debug", "--source", "cycle", "--state", f"sqlite:///{tmp_path}/state.db"]

    def call(*args: str) -> tuple[int, str]:
        code = run([*args, *common])
        out = capsys.readouterr()
        return code, out.out + out.err

    return call


def write(folder: Path, name: str, text: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(textwrap.dedent(text))


def test_plan_apply_noop_update_replace_prune_on_slurm(astra, tmp_path: Path):
    runs = tmp_path / "runs"
    write(runs, "sweep.yaml", SWEEP.format(cap=1))
    write(runs, "one.yaml", ONE.format(script="echo first"))
    cluster = SlurmCluster.from_url("slurm://debug", state_dir=tmp_path / "slurm-state")

    code, out = astra("plan", "-f", "runs", "--detailed-exitcode")
    assert code == 2, out
    assert "+ cycle-one" in out and "+ cycle-sweep" in out
    assert "Plan: 2 to create, 0 to update, 0 to replace, 0 to delete." in out

    code, out = astra("apply", "-f", "runs", "--yes")
    assert code == 0, out
    assert {r.name for r in cluster.list_runs()} >= {"cycle-one", "cycle-sweep"}

    code, out = astra("plan", "-f", "runs", "--detailed-exitcode")
    assert code == 0, out
    assert "Plan: 0 to create, 0 to update, 0 to replace, 0 to delete." in out

    # the array is still running (4 copies of 4 s, one at a time): its cap changes in place
    write(runs, "sweep.yaml", SWEEP.format(cap=3))
    code, out = astra("apply", "-f", "runs", "--yes")
    assert code == 0, out
    assert "~ cycle-sweep" in out and "spec.array.max_parallel: 1 -> 3" in out
    assert "Plan: 0 to create, 1 to update, 0 to replace, 0 to delete." in out
    throttles = wait_for(
        "the array's cap on Slurm's side",
        lambda: {j.get("array_max_tasks") for j in squeue_rows() if j["name"] == "cycle-sweep"},
        lambda caps: 3 in caps,
        timeout=30,
    )
    assert 3 in throttles
    assert cluster.get_run("cycle-sweep").document["spec"]["array"]["max_parallel"] == 3

    write(runs, "one.yaml", ONE.format(script="echo second"))
    code, out = astra("apply", "-f", "runs", "--yes")
    assert code == 0, out
    assert "-/+ cycle-one" in out and "# forces replace" in out
    assert cluster.get_run("cycle-one").document["spec"]["task_template"]["args"] == ["-c", "echo second"]

    (runs / "one.yaml").unlink()
    code, out = astra("plan", "-f", "runs", "--detailed-exitcode")
    assert code == 0, out  # without --prune, a run the files no longer hold is kept
    code, out = astra("apply", "-f", "runs", "--yes", "--prune")
    assert code == 0, out
    assert "- cycle-one" in out
    assert "Plan: 0 to create, 0 to update, 0 to replace, 1 to delete." in out
    assert "cycle-one" not in {r.name for r in cluster.list_runs()}
    assert "cycle-sweep" in {r.name for r in cluster.list_runs()}


def test_the_laptop_examples_apply_unchanged_on_slurm(astra, tmp_path: Path):
    """The examples the README's first line runs on the embedded default, here on Slurm."""
    import json
    import shutil

    from .test_integration import ROOT_EXAMPLES

    shutil.copytree(ROOT_EXAMPLES, tmp_path / "laptop")
    code, out = astra("apply", "-f", "laptop", "--yes", "--wait")
    assert code == 0, out
    assert "Plan: 2 to create, 0 to update, 0 to replace, 0 to delete." in out
    results = sorted((tmp_path / "results").glob("sweep-*.json"))
    assert [json.loads(p.read_text())["index"] for p in results] == list(range(8))
    assert {json.loads(p.read_text())["size"] for p in results} == {8}
    # one Slurm array, capped at the spec's max_parallel
    rows = [j for j in squeue_rows() if j["name"] == "laptop-sweep"]
    assert len({j["array_job_id"] for j in rows}) == 1
    assert {j.get("array_max_tasks") for j in rows} == {4}
    code, out = astra("plan", "-f", "laptop", "--detailed-exitcode")
    assert code == 0, out
