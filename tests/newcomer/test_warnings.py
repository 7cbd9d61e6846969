"""The seeds' troubleshooting table as warnings: printed after the errors, exit 0, ``--strict``
makes them errors; the same words in validate, plan and the API's answer (``warnings``)."""

from __future__ import annotations

import io
import json

import pytest
from controlplane_api.conftest import Client, Plane

from reconciler.cli.app import run
from reconciler.clusters.fake import FakeCluster
from reconciler.runspec import messages as msg

ARRAY = """metadata: {name: sweep}
spec:
  array: {size: 4}
  task_template:
    image: busybox
    command: sh
    args: [-c, 'python sweep.py --index $SLURM_ARRAY_TASK_ID']
"""
ONE_STRING = """metadata: {name: hello}
spec:
  task_template:
    image: busybox
    command: sh -c 'echo hi'
    time_limit_seconds: 60
"""
BAD = "metadata: {name: bad}\nspec: {task_template: {imagee: x}}\n"


@pytest.fixture
def cli(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("reconciler.cli.connect.connect", lambda server, token, **_: FakeCluster())
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "sweep.yaml").write_text(ARRAY)
    (tmp_path / "runs" / "hello.yaml").write_text(ONE_STRING)

    def call(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = run(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return call


WARNED = [
    f"runs/hello.yaml:5:5: spec.task_template.command: warning: {msg.LINT_ONE_STRING_COMMAND}",
    f"runs/sweep.yaml:4:3: spec.task_template.time_limit_seconds: warning: {msg.LINT_NO_TIME_LIMIT}",
    f"runs/sweep.yaml:7:16: spec.task_template.args[1]: warning: {msg.LINT_SLURM_ARRAY_TASK_ID}",
]


def test_validate_prints_warnings_after_the_errors_and_strict_makes_them_errors(cli, tmp_path):
    assert msg.LINT_SLURM_ARRAY_TASK_ID == (
        "SLURM_ARRAY_TASK_ID is not set in an array's copies: read ASTRAEUS_ARRAY_TASK_ID"
    )
    assert msg.LINT_NO_TIME_LIMIT == "without a time limit a run cannot backfill"
    assert msg.LINT_ONE_STRING_COMMAND == (
        "arguments are passed as they are: put them in args, or use command sh with args -c"
    )
    code, out, err = cli("validate", "runs")
    assert (code, out) == (0, "")
    assert err.splitlines() == [*WARNED, "2 documents in 2 files are valid"]
    (tmp_path / "runs" / "bad.yaml").write_text(BAD)
    code, out, err = cli("validate", "runs")
    assert code == 1 and out.startswith("runs/bad.yaml:2:")  # the errors first, on stdout
    assert err.splitlines()[:3] == WARNED
    code, out, err = cli("validate", "runs", "--strict")
    assert code == 1 and [line.replace("warning: ", "") for line in WARNED] == out.splitlines()[2:]
    assert json.loads(cli("validate", "runs/hello.yaml", "-o", "json")[1]) == []
    (strict,) = json.loads(cli("validate", "runs/hello.yaml", "-o", "json", "--strict")[1])
    assert strict["message"] == msg.LINT_ONE_STRING_COMMAND


def test_plan_prints_the_same_words_and_strict_makes_them_errors(cli):
    code, out, err = cli("plan", "runs", "--source", "s")
    assert code == 0 and "Plan: 2 to create" in out
    assert err.splitlines() == [
        f"hello (runs/hello.yaml): spec.task_template.command: warning: {msg.LINT_ONE_STRING_COMMAND}",
        f"sweep (runs/sweep.yaml): spec.task_template.args[1]: warning: {msg.LINT_SLURM_ARRAY_TASK_ID}",
        f"sweep (runs/sweep.yaml): spec.task_template.time_limit_seconds: warning: {msg.LINT_NO_TIME_LIMIT}",
    ]
    code, _, err = cli("plan", "runs", "--source", "s", "--strict")
    assert code == 1 and err.endswith("astra: error: 3 warnings, and --strict: they are errors\n")
    code, _, err = cli("apply", "runs", "--source", "s", "--yes", "--strict")
    assert code == 1 and "not applied: there are warnings" in err


def test_the_api_answers_a_write_with_its_warnings(tmp_path):
    plane = Plane(tmp_path)
    client = Client(plane)
    try:
        doc = {
            "metadata": {"name": "hello"},
            "spec": {"task_template": {"image": "busybox", "command": "sh -c 'echo hi'"}},
        }
        created = client.post("/api/runs", json=doc)
        assert created.status_code == 201
        assert created.json()["warnings"] == [
            {"path": "spec.task_template.command", "message": msg.LINT_ONE_STRING_COMMAND},
            {"path": "spec.task_template.time_limit_seconds", "message": msg.LINT_NO_TIME_LIMIT},
        ]
        doc["metadata"]["resource_version"] = created.json()["metadata"]["resource_version"]
        doc["metadata"]["labels"] = {"team": "a"}
        updated = client.put("/api/runs/hello", json=doc)
        assert updated.status_code == 200 and len(updated.json()["warnings"]) == 2
        assert "warnings" not in client.get("/api/runs/hello").json()  # a read answers the run alone
    finally:
        plane.close()
