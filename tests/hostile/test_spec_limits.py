"""Hostile documents: every limit of the spec layer, in the one validator (CLI, API 422, plan).

Each case is one a careless colleague or an attacker could commit or POST; each answers with
its path and its words, never a traceback, a hang or the wrong words (NaN is not "null").
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.runspec import messages as msg
from reconciler.runspec.validate import validate_data

ROOT = Path(__file__).resolve().parents[2]
SWEEP = json.loads((ROOT / "docs" / "seeds" / "sweep.json").read_text())
TT = "spec.task_template"


def sweep(**template) -> dict:
    doc = json.loads(json.dumps(SWEEP))
    doc["spec"]["task_template"].update(template)
    return doc


def problems(doc) -> dict[str, str]:
    return {str(e.path): e.message for e in validate_data(doc)}


def test_workers_per_run_summed_over_groups_are_at_most_10000():
    doc = {
        "metadata": {"name": "g"},
        "spec": {
            "task_groups": [
                {"name": "a", "replicas": 6000, "task_template": {"image": "i"}},
                {"name": "b", "replicas": 6000, "task_template": {"image": "i"}},
            ]
        },
    }
    assert problems(doc) == {"spec.task_groups": "a run has at most 10000 workers; this one asks for 12000"}
    doc["spec"]["task_groups"][0]["replicas"] = 50_000_000  # the stalling POST of the issue
    assert problems(doc) == {
        "spec.task_groups[0].replicas": "a run has at most 10000 workers; this one asks for 50000000"
    }


def test_machines_are_workers_too():
    doc = sweep(requested_resources={"machines": 20000})
    del doc["spec"]["array"]
    assert problems(doc)[f"{TT}.requested_resources.machines"] == (
        "a run has at most 10000 workers; this one asks for 20000"
    )


@pytest.mark.parametrize(
    ("template", "path"),
    [
        ({"env": {"A": "\udc00"}}, f"{TT}.env.A"),
        ({"env": {"B\x00": "x"}}, f"{TT}.env.B\\x00"),
        ({"args": ["-c", "echo \x00"]}, f"{TT}.args[1]"),
        ({"image": "busy\x00box"}, f"{TT}.image"),
    ],
    ids=["lone-surrogate", "nul-in-a-key", "nul-in-an-arg", "nul-in-the-image"],
)
def test_text_is_valid_unicode_without_nul(template, path):
    assert problems(sweep(**template)) == {path: "must be valid Unicode text without NUL characters"}


def test_integers_fit_in_64_bits_and_quantities_too():
    doc = sweep(requested_resources={"cpu_cores": 10**30, "memory_bytes": "99999999999999999P"})
    assert problems(doc) == {
        f"{TT}.requested_resources.cpu_cores": msg.INTEGER_RANGE,
        f"{TT}.requested_resources.memory_bytes": msg.QUANTITY_RANGE,
    }


@pytest.mark.parametrize(("value", "word"), [(float("nan"), "NaN"), (float("inf"), "Infinity")])
def test_nan_and_infinity_are_named_as_such(value, word):
    doc = sweep(requested_resources={"cpu_cores": value})
    assert problems(doc) == {f"{TT}.requested_resources.cpu_cores": f"must be a finite number, not {word}"}


def test_string_lengths_a_real_run_never_meets():
    doc = sweep(image="x" * 2000, env={"A": "y" * 200_000}, command="z" * 5000)
    assert problems(doc) == {
        f"{TT}.image": "must be at most 1024 characters, not 2000",
        f"{TT}.env.A": "must be at most 131072 characters, not 200000",
        f"{TT}.command": "must be at most 4096 characters, not 5000",
    }


def test_the_whole_document_is_at_most_one_mebibyte():
    doc = sweep(args=["a" * 100_000] * 11)
    assert problems(doc) == {
        "": msg.DOCUMENT_TOO_LARGE.format(size=len(json.dumps(doc, separators=(",", ":"))))
    }


def test_nesting_is_bounded_and_said_once():
    deep: list = []
    for _ in range(500):
        deep = [deep]
    doc = sweep()
    doc["spec"]["template_data"] = deep
    (only,) = validate_data(doc)
    assert only.message == msg.TOO_DEEP and len(only.path.steps) == msg.DEPTH_MAX


def test_the_cli_says_each_in_one_line_with_its_position(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "metadata: {name: bad}\n"
        "spec:\n"
        "  task_template:\n"
        "    image: busybox\n"
        '    args: ["-c", "echo \\0"]\n'
        "    requested_resources: {cpu_cores: 100000000000000000000000}\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "reconciler.cli", "validate", str(bad)], capture_output=True, text=True
    )
    assert out.returncode == 1
    assert f"{bad}:5:18: {TT}.args[1]: must be valid Unicode text without NUL characters" in out.stdout
    assert f"{bad}:6:38: {TT}.requested_resources.cpu_cores: {msg.INTEGER_RANGE}" in out.stdout
    assert "Traceback" not in out.stdout + out.stderr
