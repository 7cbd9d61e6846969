"""``astra get runs``' SCHEDULE NEXT columns: there when a run on a schedule is listed, absent
otherwise (every other table stays as it was)."""

from __future__ import annotations

from reconciler.cli.get import render_runs
from reconciler.cli.runviews import brief
from reconciler.runs import LiveRun

NOW = 1_000_000.0


def _run(name: str, **kw) -> dict:
    return brief(LiveRun(name, {"metadata": {"name": name}, "spec": {}}, 1, kw.pop("state", "Pending"), **kw))


def test_a_run_on_a_schedule_adds_schedule_and_next_and_suspended_says_so(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    paris = {
        "cron": "0 2 * * *",
        "timezone": "Europe/Paris",
        "suspended": False,
        "next_at": NOW + 3 * 3600 + 5,
    }
    weekly = {"cron": "0 3 * * 0", "timezone": "UTC", "suspended": True, "next_at": None}
    chosen = [
        _run("nightly", reason="On a schedule", schedule=paris),
        _run("weekly", reason="On a schedule", schedule=weekly),
        _run("nightly-20261202-0200", state="Completed", created_at=NOW - 60),
    ]
    lines = [line.split("   ") for line in render_runs(chosen, "table", NOW, "local", False)]
    assert [[cell.strip() for cell in line if cell.strip()] for line in lines] == [
        ["NAME", "STATE", "REASON", "WORKERS", "GPUS", "AGE", "SOURCE", "SCHEDULE", "NEXT"],
        ["nightly", "Pending", "On a schedule", "0/0", "0", "-", "-", "0 2 * * * Europe/Paris", "in 3h"],
        ["weekly", "Pending", "On a schedule", "0/0", "0", "-", "-", "0 3 * * 0 UTC", "suspended"],
        ["nightly-20261202-0200", "Completed", "-", "0/0", "0", "1m", "-", "-", "-"],
    ]


def test_no_run_on_a_schedule_no_columns(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    assert render_runs([_run("plain")], "table", NOW, "local", False) == [
        "NAME    STATE     REASON   WORKERS   GPUS   AGE   SOURCE",
        "plain   Pending   -        0/0       0      -     -",
    ]
