"""How each shape's batch script carries secrets (issue 30), as text: pyxis is not installed on
the local cluster, so its lines are checked here, not run (``test_secrets_nodes.py`` runs the
others). Whatever the shape, the script names the secrets file's path and the variables'
names, never a value; the batch step's wrapper (``--carry``) hands the values to ``srun``'s
tasks in their environment, and each task's wrapper (``--task PART``) takes them."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from reconciler.clusters.slurm import jobwrapper
from reconciler.clusters.slurm.drives import SlurmDrives
from reconciler.clusters.slurm.mapping import to_submission
from reconciler.clusters.slurm.unsupported import NO_SECRET_FILES_PYXIS
from reconciler.runspec.parse import parse_run

ENV = {"HF_TOKEN": {"secret": "hf-token"}, "PLAIN": "x"}
WRAP = "python3 /S/bin/astra-job.py"


def _sub(spec: dict[str, Any], images: str = "host", drives: SlurmDrives | None = None):
    run = parse_run({"metadata": {"name": "r"}, "spec": spec})
    return to_submission(
        run, nonce="n0", log_dir="/S/logs/r", node_gpus=8, images=images, nodes_available=2, drives=drives
    )


def _template(**more: Any) -> dict[str, Any]:
    return {"image": "img:1", "command": "sh", "args": ["-c", "echo $HF_TOKEN"], "env": ENV, **more}


def test_a_gang_under_pyxis_carries_the_values_into_its_containers_by_name():
    s = _sub({"task_template": _template(requested_resources={"machines": 2})}, images="pyxis")
    assert s.errors == []
    last = s.script.splitlines()[-1]
    assert last.startswith(f'exec {WRAP} --carry "$ASTRA_SECRET_FILE" srun ')
    # the wrapper's folder mounted read-only; the carrying variables named so the image's own
    # environment cannot hide them
    assert " --container-image=img:1 --container-mounts=/S/bin:/S/bin:ro" in last
    assert " --container-env=ASTRA_JOB_SECRETS_0,ASTRA_SECRET_0_0 " in last
    assert f"exec {WRAP} --task 0 \"$@\"' astra-worker sh -c 'echo $HF_TOKEN'" in last
    assert "HF_TOKEN=" not in s.script and "--no-requeue" in s.options


def test_one_machine_under_pyxis_takes_the_same_path_through_srun():
    s = _sub({"task_template": _template()}, images="pyxis")
    last = s.script.splitlines()[-1]
    assert last.startswith(f'exec {WRAP} --carry "$ASTRA_SECRET_FILE" srun --container-image=img:1 ')
    assert "--container-env=ASTRA_JOB_SECRETS_0,ASTRA_SECRET_0_0" in last


def test_secret_files_into_a_pyxis_container_are_refused_in_words():
    s = _sub(
        {"task_template": _template(secret_files=[{"name": "k", "mount_path": "/k/id"}])}, images="pyxis"
    )
    assert [(str(e.path), e.message) for e in s.errors] == [
        ("spec.task_template.secret_files", NO_SECRET_FILES_PYXIS)
    ]


def test_a_hetjob_under_pyxis_names_each_groups_part_and_a_group_without_secrets_sheds_them():
    groups = [
        {"name": "a", "replicas": 1, "task_template": _template()},
        {"name": "b", "replicas": 1, "task_template": {"image": "img:2", "command": "true"}},
    ]
    s = _sub({"start": "Gang", "task_groups": groups}, images="pyxis")
    assert s.errors == [] and s.kind == "hetjob"
    lines = s.script.splitlines()
    assert 'ASTRA_SECRET_FILE="$ASTRA_SECRETS.0"; unset ASTRA_SECRETS' in lines
    a, b = lines[-1].split(" : ")
    assert a.startswith(f'exec {WRAP} --carry "$ASTRA_SECRET_FILE" srun --het-group=0 ')
    assert "--container-env=ASTRA_JOB_SECRETS_0,ASTRA_SECRET_0_0" in a and f"{WRAP} --task 0" in a
    assert "--container-env" not in b and "astra-job.py" not in b
    assert 'unset ${!ASTRA_SECRET@} ${!ASTRA_JOB_SECRETS@}; exec "$@"' in b
    assert s.options.count("--no-requeue") == 2  # every component: one job


def test_groups_each_of_its_own_job_read_their_own_file():
    groups = [
        {"name": "a", "replicas": 2, "task_template": _template()},
        {"name": "b", "replicas": 1, "start_after": "a", "task_template": _template()},
    ]
    s = _sub({"task_groups": groups}, images="pyxis")
    assert s.errors == [] and s.kind == "groups"
    for job in s.jobs:
        (g,) = job.groups
        assert f'ASTRA_SECRET_FILE="$ASTRA_SECRETS.{g}"; unset ASTRA_SECRETS' in job.script.splitlines()
        assert "--container-env=ASTRA_JOB_SECRETS_0,ASTRA_SECRET_0_0" in job.script


def _wrapper(tmp_path: Path) -> Path:
    import inspect

    from reconciler import masking

    program = tmp_path / "astra-job.py"
    program.write_text(jobwrapper.program_text(inspect.getsource(masking), inspect.getsource(jobwrapper)))
    return program


def test_the_batch_steps_wrapper_hands_the_values_on_in_the_environment_and_the_task_takes_them(
    tmp_path: Path,
):
    """``--carry`` then ``--task``, as a job runs them (``srun`` between them passes the
    environment on): the task sees its value (masked in its output), no carrier, and the file is gone."""
    program = _wrapper(tmp_path)
    secret_file = tmp_path / "n0.0"
    parts = [{"env": {"T": base64.b64encode(b"tok_canary").decode()}, "files": {}}, {"env": {}, "files": {}}]
    secret_file.write_text(json.dumps({"parts": parts}))
    task = "echo t=$T; env | grep -c '^ASTRA_.*SECRET'; printf %s \"$T\" | od -c | head -1"
    argv = [sys.executable, str(program), "--carry", str(secret_file)]
    argv += [sys.executable, str(program), "--task", "0", "sh", "-c", task]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASTRA")}
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == ["t=***", "0"]  # masked; no carrier reached the worker
    assert "t   o   k   _   c   a   n   a   r   y" in lines[2]  # the worker had the value itself
    assert not secret_file.exists()
    gone = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30)
    assert (gone.returncode, gone.stderr.strip()) == (1, jobwrapper.GONE)
    untold = subprocess.run(argv[4:], capture_output=True, text=True, env=env, timeout=30)
    assert (untold.returncode, untold.stderr.strip()) == (1, jobwrapper.UNCARRIED)


def test_a_64_kib_binary_file_and_a_value_with_newlines_pass_through_the_environment(tmp_path: Path):
    """The largest value a secret may hold (64 KiB, any bytes) as a file, and an env value with
    newlines, carried by ``--carry`` and mounted by ``--task`` (0400, in a tmpfs of bwrap's)."""
    program = _wrapper(tmp_path)
    blob = bytes(range(256)) * 256  # 64 KiB, every byte value
    key = tmp_path / "keys" / "blob"
    part = {
        "env": {"T": base64.b64encode(b"line one\nline two").decode()},
        "files": {str(key): base64.b64encode(blob).decode()},
    }
    secret_file = tmp_path / "n0.0"
    secret_file.write_text(json.dumps({"parts": [part]}))
    task = f'sha256sum < {key} | cut -c1-64; stat -c %a {key}; printf %s "$T" | wc -l'
    argv = [sys.executable, str(program), "--carry", str(secret_file)]
    argv += [sys.executable, str(program), "--task", "0", "sh", "-c", task]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASTRA")}
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [hashlib.sha256(blob).hexdigest(), "400", "1"]
    assert not key.exists()
