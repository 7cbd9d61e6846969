"""Where a run would start on Slurm: ``sbatch --test-only``'s answer in the plan (submits nothing)."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from reconciler.cli.app import run
from reconciler.clusters.slurm import SlurmCluster
from reconciler.clusters.slurm.outlook import read_test_only

SERVER = "slurm://debug"
NOW = dt.datetime(2026, 12, 1, 4, 10, 58).timestamp()


def test_sbatch_test_only_in_words():
    said = "sbatch: Job 187 to start at {at} using 1 processors on nodes vm-n1 in partition debug\n"
    assert read_test_only(said.format(at="2026-12-01T04:10:58"), NOW) == {
        "kind": "start",
        "words": "on nodes vm-n1 in partition debug",
    }
    assert read_test_only(said.format(at="2026-12-01T05:00:00"), NOW) == {
        "kind": "wait",
        "words": "Slurm expects it to start at 2026-12-01T05:00:00, on nodes vm-n1",
    }
    refused = "allocation failure: Requested node configuration is not available\n"
    assert read_test_only(refused, NOW) == {
        "kind": "fail",
        "words": "Slurm: Requested node configuration is not available",
    }
    assert read_test_only("sbatch: something else\n", NOW) is None


@pytest.fixture
def cli(slurm_state, monkeypatch, capsys):
    monkeypatch.setenv("NO_COLOR", "1")

    def call(*argv: str) -> tuple[int, str, str]:
        code = run([*argv, "--server", SERVER])
        out, err = capsys.readouterr()
        return code, out, err

    return call


def test_the_plan_on_slurm_says_where_runs_would_start_and_submits_nothing(cli, tmp_path):
    (tmp_path / "runs").mkdir()
    for name, cores in (("fits", 1), ("toobig", 1000)):
        (tmp_path / "runs" / f"{name}.yaml").write_text(
            f"metadata: {{name: {name}}}\nspec: {{task_template: {{image: x, command: 'true', "
            f"time_limit_seconds: 60, requested_resources: {{cpu_cores: {cores}}}}}}}\n"
        )
    code, out, err = cli("plan", "-f", "runs", "--source", "s")
    # a run Slurm could never start is refused, as every ask no machine could hold (issue 32)
    assert (code, err) == (1, "astra: error: toobig: Slurm: Requested node configuration is not available\n")
    # the shared test cluster may be busy with other jobs: then Slurm says when it expects to start
    assert re.search(
        r"\+ fits  create  \(runs/fits\.yaml\)\n    "
        r"would (start: on nodes vm-n|wait: Slurm expects it to start at )",
        out,
    ), out
    assert "    would fail: Slurm: Requested node configuration is not available\n" in out
    assert SlurmCluster.from_url(SERVER, state_dir=tmp_path / "state").list_runs() == []
    assert not (tmp_path / "state" / "logs").exists()  # no folder made for a run that is not
