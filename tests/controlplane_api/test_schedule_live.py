"""A run on a schedule on a real ``astra server``, as a user tries it from the command line:
``astra get runs`` shows SCHEDULE NEXT, ``astra schedule suspend|resume`` (and ``describe``)."""

from __future__ import annotations

import re

from .test_api import tiny


def test_get_runs_shows_the_schedule_and_suspend_and_resume_go_through_the_cli(live):
    nightly = tiny("nightly", schedule={"cron": "0 2 * * *", "timezone": "Europe/Paris"})
    assert live.api("POST", "/runs", json=nightly).status_code == 201
    assert live.api("POST", "/runs", json=tiny("plain")).status_code == 201

    listed = live.astra("get", "runs")
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == [
        "NAME",
        "STATE",
        "REASON",
        "WORKERS",
        "GPUS",
        "AGE",
        "SOURCE",
        "SCHEDULE",
        "NEXT",
    ]
    row = next(r for r in rows if r.startswith("nightly "))
    assert re.search(r"   0 2 \* \* \* Europe/Paris   in \d+[smh]$", row), row
    assert next(r for r in rows if r.startswith("plain ")).split()[-3:] == ["-", "-", "-"]
    assert "SCHEDULE" not in live.astra("get", "runs", "plain").stdout  # no schedule listed: no columns

    suspended = live.astra("schedule", "suspend", "nightly", "--reason", "maintenance")
    assert (suspended.returncode, suspended.stdout) == (
        0,
        "schedule of nightly suspended: no run is made until 'astra schedule resume nightly'\n",
    )
    assert live.astra("get", "runs", "nightly").stdout.splitlines()[1].endswith("Europe/Paris   suspended")
    described = live.astra("describe", "run", "nightly").stdout
    assert "Schedule:  0 2 * * * (Europe/Paris), concurrency Forbid, keeps 3 finished\n" in described
    assert "Next run:  suspended by " in described
    assert "suspended by" in described and "(maintenance): no run is made until it is resumed" in described

    resumed = live.astra("schedule", "resume", "nightly")
    assert resumed.returncode == 0 and resumed.stdout.startswith("schedule of nightly resumed: next run 20")
    assert re.search(r"   in \d+[smh]$", live.astra("get", "runs", "nightly").stdout.splitlines()[1])

    refused = live.astra("schedule", "suspend", "plain")
    assert refused.returncode == 1
    assert "run plain has no schedule: give it spec.schedule to make it one" in refused.stderr
    events = [e for e in live.api("GET", "/events").json()["items"] if e["kind"] == "schedule"]
    assert sorted(e["action"] for e in events) == ["resume", "suspend"]
