"""The documents behind ``astra astraeus run`` and ``astra slurm sbatch`` (pure)."""

from __future__ import annotations

import json

import pytest

from reconciler.runspec.validate import validate_data
from reconciler.submit import SubmitError, run_document, sbatch_document

from .conftest import SEEDS
from .test_live import SWEEP_SBATCH


def test_the_seed_sbatch_becomes_the_seed_sweep_array():
    doc = sbatch_document(SWEEP_SBATCH, "sweep.sbatch", "sweep")
    sweep = json.loads((SEEDS / "sweep.json").read_text())["spec"]
    assert validate_data(doc) == []
    assert doc["metadata"] == {"name": "sweep"}
    assert doc["spec"]["array"] == sweep["array"]
    t = doc["spec"]["task_template"]
    assert t["requested_resources"] == sweep["task_template"]["requested_resources"]
    assert t["time_limit_seconds"] == 3600 and t["restart_policy"] == "Never"
    assert (t["image"], t["command"], t["args"]) == (
        "registry.example.com/ml/sweep:1",
        "/bin/bash",
        ["-c", SWEEP_SBATCH],
    )


@pytest.mark.parametrize(
    ("given", "seconds"), [("90", 5400), ("1:30", 90), ("2-0", 172800), ("1:00:00", 3600)]
)
def test_slurm_times(given, seconds):
    doc = sbatch_document(f"#SBATCH --time={given}\n#SBATCH --container-image=x\ntrue\n", "f", "f")
    assert doc["spec"]["task_template"]["time_limit_seconds"] == seconds


def test_directives_stop_at_the_first_command_and_short_forms_work():
    text = "#!/bin/sh\n#SBATCH -J named --mem 500M\n#SBATCH --container-image x\necho hi\n#SBATCH --nodes=3\n"
    doc = sbatch_document(text, "f", "f")
    assert doc["metadata"]["name"] == "named"
    assert doc["spec"]["task_template"]["requested_resources"] == {"memory_bytes": 500 * 1024**2}
    assert "array" not in doc["spec"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("#SBATCH --nodes=2", "f:2: unknown #SBATCH directive '--nodes'"),
        ("#SBATCH -N 2", "f:2: unknown #SBATCH directive '-N'"),
        ("#SBATCH --array=1-5", "f:2: --array: '1-5' is not supported"),
        ("#SBATCH --gres=tpu:1", "f:2: --gres: 'tpu:1' is not supported"),
    ],
)
def test_what_cannot_become_a_run_is_a_clear_error(line, message):
    with pytest.raises(SubmitError) as info:
        sbatch_document(f"#!/bin/sh\n{line}\n#SBATCH --container-image=x\ntrue\n", "f", "f")
    assert str(info.value).startswith(message)


def test_a_script_without_an_image_is_refused():
    with pytest.raises(SubmitError, match="no #SBATCH --container-image"):
        sbatch_document("#SBATCH --gres=gpu:1\ntrue\n", "f", "f")


def test_astraeus_run_without_gpus_puts_cpus_and_memory_per_worker():
    doc = run_document("a", "img", ["python", "x.py"], cpus=2, mem="1Gi", time="90m")
    assert validate_data(doc) == []
    t = doc["spec"]["task_template"]
    assert t["requested_resources"] == {"cpu_cores": 2, "memory_bytes": 1024**3}
    assert (t["command"], t["args"], t["time_limit_seconds"]) == ("python", ["x.py"], 5400)
    with pytest.raises(SubmitError, match="--mem: 'lots' is not valid"):
        run_document("a", "img", ["x"], mem="lots")
