"""``astra usage`` against a live ``astra server`` (issue 35): a table, JSON and CSV of what
``GET /usage`` answers, and bad periods refused in one line."""

from __future__ import annotations

import csv
import io
import json

import pytest

from .conftest import LiveServer, until


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("usage")
    (root / "work").mkdir()
    live = LiveServer(root / "home", root / "work").start()
    spec = {
        "metadata": {"name": "hold", "labels": {"team": "nlp"}},
        "spec": {
            "task_template": {
                "image": "busybox",
                "command": "sleep",
                "args": ["600"],
                "requested_resources": {"gpu_requests": {"count": 2}},
            }
        },
    }
    assert live.api("POST", "/runs", json=spec).status_code == 201
    until(lambda: live.api("GET", "/runs/hold").json()["status"]["state"] == "Running", what="hold to run")
    yield live
    live.stop()


def test_usage_as_json_is_the_api_s_answer_and_counts_the_open_hold(server):
    done = server.astra("usage", "-o", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["by"] == "workspace" and report["period"]["label"] == "all time"
    [line] = report["items"]
    assert (line["workspace"], line["key"], line["runs"], line["wasted_gpu_seconds"]) == (
        "default",
        "default",
        1,
        0,
    )
    assert line["gpu_seconds"] > 0 and line["gpu_hours"] == round(line["gpu_seconds"] / 3600, 4)


def test_usage_by_label_as_csv_and_as_a_table(server):
    done = server.astra("usage", "--by", "label:team", "--since", "30d", "-o", "csv")
    assert done.returncode == 0, done.stderr
    rows = list(csv.reader(io.StringIO(done.stdout)))
    assert rows[0] == ["workspace", "label team", "gpu-hours", "wasted-gpu-hours", "runs", "gpu-seconds"]
    assert [[*r[:2], r[4]] for r in rows[1:]] == [["default", "nlp", "1"]]
    table = server.astra("usage").stdout.splitlines()
    assert table[0] == "GPU-hours on cluster default, all time"
    assert table[1].split() == ["WORKSPACE", "GPU-HOURS", "WASTED-GPU-HOURS", "RUNS", "GPU-SECONDS"]
    assert table[2].split()[0] == "default"


def test_a_bad_period_is_one_line(server):
    done = server.astra("usage", "--month", "2026-13")
    assert done.returncode == 1
    assert done.stderr.strip().endswith("--month '2026-13': give a year and a month, as 2026-11")
    assert "Traceback" not in done.stderr
