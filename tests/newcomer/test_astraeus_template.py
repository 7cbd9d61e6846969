"""``astra astraeus run --template NAME --set k=v``: the template's fields win over the command's
defaults, and only the flags given override them, so a gang template gives a gang."""

from __future__ import annotations

import json
import shutil

import httpx

from reconciler.controlplane.server import read_info

from .conftest import ROOT


def run_of(user, name: str) -> dict:
    info = read_info(user.state)
    assert info is not None
    token = (user.state / "token").read_text().strip()
    answer = httpx.get(f"{info.url}/api/runs/{name}", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    return answer.json()["spec"]


def test_a_template_gives_its_fields_and_the_flags_given_override_them(user, tmp_path):
    (tmp_path / "templates").mkdir()
    seed = json.loads((ROOT / "docs" / "seeds" / "llama-ft.json").read_text())
    seed["metadata"]["name"] = "llama-gang"  # the seed's run.json, saved as a template
    (tmp_path / "templates" / "llama-gang.json").write_text(json.dumps(seed))
    shutil.copy(ROOT / "templates" / "gang.yaml", tmp_path / "templates")

    missing = user.astra("astraeus", "run", "--name", "a", "--template", "gang", cwd=tmp_path)
    assert missing.returncode == 1
    assert "needs parameter 'gpus'" in missing.stderr and "add --set gpus=VALUE" in missing.stderr

    gang = ["--template", "gang", "--set", "gpus=16"]
    done = user.astra("astraeus", "run", "--name", "a", *gang, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("a submitted to default: ")
    spec = run_of(user, "a")
    assert (spec["start"], spec["on_failure"]) == ("Gang", "RestartJob")  # the template's, not Independent
    task = spec["task_template"]
    assert task["image"] == "nvcr.io/nvidia/pytorch:24.08-py3" and task["command"] == "sh"
    assert task["requested_resources"]["gpu_requests"]["count"] == 16
    assert task["restart_policy"] == "Never"  # the template says nothing: the command's default

    done = user.astra(
        "astraeus", "run", "--name", "b", "--template", "llama-gang", "--image", "mine:1", "--gpus", "8",
        "--", "python", "train.py", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    spec = run_of(user, "b")
    assert spec["start"] == "Gang"
    task = spec["task_template"]
    assert (task["image"], task["command"], task["args"]) == ("mine:1", "python", ["train.py"])
    assert task["requested_resources"]["gpu_requests"]["count"] == 8
    assert task["requested_resources"]["per_gpu"]["cpu_cores"] == 12  # kept from the template
    assert task["time_limit_seconds"] == 43200

    plain = user.astra("astraeus", "run", "--name", "c", "--image", "busybox", "--", "true", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    spec = run_of(user, "c")
    assert (spec["start"], spec["task_template"]["restart_policy"]) == ("Independent", "Never")
