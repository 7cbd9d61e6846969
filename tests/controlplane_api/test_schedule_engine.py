"""Runs on a schedule, made by the engine's tick on the simulated clock (no sleeps): one run a
minute; five minutes of a stopped server make one catch-up run, not five; ``Forbid`` skips in
words, ``Replace`` cancels the going run, ``keep`` deletes the oldest finished; a suspended
schedule makes nothing and its resume starts one missed time, not all of them."""

from __future__ import annotations

from datetime import UTC, datetime

from reconciler.controlplane.simulation import Outcome

from .simulated import Served
from .test_api import tiny

INVENTORY = {"defaults": {"gpus": 8}, "machines": [{"name": "m0"}, {"name": "m1"}]}
#: 01:59:30 UTC: the first minute's time (02:00) is 30 s away.
T0 = datetime(2026, 12, 2, 1, 59, 30, tzinfo=UTC).timestamp()


def served(tmp_path, after: float | None = 20.0) -> Served:
    s = Served(tmp_path, INVENTORY, start=T0)
    s.executor.default = Outcome(after=after)  # each run made works 20 s (None: until stopped)
    return s


def every_minute(**schedule) -> dict:
    return tiny("nightly", schedule={"cron": "* * * * *", **schedule})


def run_names(s: Served) -> list[str]:
    return [r["metadata"]["name"] for r in s.call("GET", "/api/runs").json()["items"]]


def made(s: Served) -> list[str]:
    return [n for n in run_names(s) if n != "nightly"]


def run_for(s: Served, seconds: int, every: int = 10) -> None:
    for _ in range(seconds // every):
        s.step(every)


def test_a_schedule_is_accepted_and_holds_no_workers_and_says_its_next_time(tmp_path):
    s = served(tmp_path)
    r = s.call("POST", "/api/runs", json=every_minute(timezone="Europe/Paris"))
    assert r.status_code == 201, r.text
    s.step()
    run = s.call("GET", "/api/runs/nightly").json()
    assert run["status"]["gpus_held"] == 0 and run["status"]["workers_running"] == 0
    assert run["status"]["workers"] == 0 and run["status"]["readout"] == "Workers 0 running of 0"
    assert run["status"]["state"] == "Pending"
    assert run["status"]["reason"] == (
        "Waiting for its schedule ('* * * * *', Europe/Paris): it makes a run nightly-YYYYMMDD-HHMM "
        "at each time and holds no workers itself (astra get runs shows the next time)"
    )
    assert run["status"]["schedule"] == {
        "cron": "* * * * *",
        "timezone": "Europe/Paris",
        "concurrency": "Forbid",
        "keep": 3,
        "suspended": False,
        "suspended_at": None,
        "suspended_by": None,
        "next_at": T0 + 30,
        "last_schedule_at": None,
        "last_successful_at": None,
        "active": [],
    }
    listed = s.call("GET", "/api/runs").json()["items"]
    assert listed[0]["status"]["schedule"]["next_at"] == T0 + 30
    assert s.call("GET", "/api/runs/nightly/schedule").json()["next_at"] == T0 + 30


def test_every_minute_makes_one_run_a_minute_named_by_the_schedule_s_timezone(tmp_path):
    s = served(tmp_path)
    s.call("POST", "/api/runs", json=every_minute(timezone="Europe/Paris", keep=10))
    run_for(s, 180)
    assert made(s) == ["nightly-20261202-0300", "nightly-20261202-0301", "nightly-20261202-0302"]
    first = s.call("GET", "/api/runs/nightly-20261202-0300").json()
    assert first["metadata"]["labels"] == {"astra.schedule": "nightly"}
    assert "schedule" not in first["spec"] and first["status"]["schedule"] is None
    assert first["status"]["state"] == "Completed"
    sched = s.call("GET", "/api/runs/nightly").json()["status"]["schedule"]
    assert sched["last_schedule_at"] == T0 + 150  # 02:02 UTC, 03:02 in Paris
    assert sched["last_successful_at"] is not None


def test_a_server_stopped_for_five_minutes_makes_one_catch_up_run_not_five(tmp_path):
    s = served(tmp_path)
    s.call("POST", "/api/runs", json=every_minute(keep=10))
    run_for(s, 60)
    assert made(s) == ["nightly-20261202-0200"]
    s.clock.advance(300)  # the server is down: no tick from 02:00:30 to 02:05:30
    s.restart()  # the store kept, a new engine
    s.step()
    assert made(s) == ["nightly-20261202-0200", "nightly-20261202-0205"]
    run_for(s, 60)
    assert made(s) == ["nightly-20261202-0200", "nightly-20261202-0205", "nightly-20261202-0206"]


def test_forbid_skips_a_time_in_words_while_the_run_it_made_is_going(tmp_path):
    s = served(tmp_path, after=None)  # a run made never ends by itself
    s.call("POST", "/api/runs", json=every_minute())
    run_for(s, 130)
    assert made(s) == ["nightly-20261202-0200"]
    assert s.call("GET", "/api/runs/nightly").json()["status"]["schedule"]["active"] == [
        "nightly-20261202-0200"
    ]
    said = [e["reason"] for e in s.call("GET", "/api/runs/nightly/events").json()["items"]]
    assert "nightly: the run of 20261202-0201 is skipped: nightly-20261202-0200 is still going" in said


def test_replace_cancels_the_going_run_and_makes_the_next(tmp_path):
    s = served(tmp_path, after=None)
    s.call("POST", "/api/runs", json=every_minute(concurrency="Replace"))
    run_for(s, 90)
    run_for(s, 10)  # the cancel is carried out
    assert made(s) == ["nightly-20261202-0200", "nightly-20261202-0201"]
    state = {n: s.call("GET", f"/api/runs/{n}").json()["status"]["state"] for n in made(s)}
    assert state == {"nightly-20261202-0200": "Cancelled", "nightly-20261202-0201": "Running"}


def test_keep_deletes_the_oldest_finished_runs(tmp_path):
    s = served(tmp_path)
    s.call("POST", "/api/runs", json=every_minute(keep=2))
    run_for(s, 240)
    assert made(s) == ["nightly-20261202-0202", "nightly-20261202-0203"]
    assert s.call("GET", "/api/runs/nightly-20261202-0200").status_code == 404


def test_suspended_makes_nothing_and_resumed_starts_one_missed_time_not_all(tmp_path):
    s = served(tmp_path)
    s.call("POST", "/api/runs", json=every_minute(keep=10))
    run_for(s, 60)
    r = s.call("PUT", "/api/runs/nightly/schedule/suspend")
    assert r.status_code == 200 and r.json()["suspended"] and r.json()["next_at"] is None
    run_for(s, 300)
    assert made(s) == ["nightly-20261202-0200"]
    r = s.call("DELETE", "/api/runs/nightly/schedule/suspend")
    assert r.status_code == 200 and not r.json()["suspended"]
    s.step()
    assert made(s) == ["nightly-20261202-0200", "nightly-20261202-0205"]  # the latest missed, once
    audit = [e for e in s.call("GET", "/api/events").json()["items"] if e["kind"] == "schedule"]
    assert sorted((a["action"], a["name"]) for a in audit) == [("resume", "nightly"), ("suspend", "nightly")]


def test_a_run_with_no_schedule_has_none_to_suspend(tmp_path):
    s = served(tmp_path)
    s.call("POST", "/api/runs", json=tiny("plain"))
    r = s.call("PUT", "/api/runs/plain/schedule/suspend")
    assert (r.status_code, r.json()) == (
        409,
        {"detail": "run plain has no schedule: give it spec.schedule to make it one"},
    )
    assert s.call("PUT", "/api/runs/nope/schedule/suspend").status_code == 404


def test_deleting_the_run_on_a_schedule_leaves_its_runs_and_one_made_again_keeps_the_suspension(tmp_path):
    s = served(tmp_path, after=None)
    s.call("POST", "/api/runs", json=every_minute())
    run_for(s, 60)
    s.call("PUT", "/api/runs/nightly/schedule/suspend", json={"reason": "maintenance"})
    assert s.call("DELETE", "/api/runs/nightly").status_code == 200  # as an apply's replace does
    s.step()
    assert run_names(s) == ["nightly-20261202-0200"]  # the run it made goes on
    assert s.call("GET", "/api/runs/nightly-20261202-0200").json()["status"]["state"] == "Running"
    s.call("POST", "/api/runs", json=every_minute())
    run_for(s, 120)
    again = s.call("GET", "/api/runs/nightly").json()["status"]["schedule"]
    assert again["suspended"] and again["active"] == ["nightly-20261202-0200"]
    assert made(s) == ["nightly-20261202-0200"]  # suspended: 02:01 and 02:02 made nothing


def test_a_run_on_a_schedule_makes_no_worker_while_its_runs_made_do(tmp_path):
    """A template (a CronJob) is never admitted: ``astra get workers`` lists only the workers of
    the runs it made, and the console's queue does not list it as waiting for room."""
    s = served(tmp_path, after=None)
    s.call("POST", "/api/runs", json=every_minute())
    s.call("POST", "/api/runs", json=tiny("arrayed", schedule={"cron": "0 3 * * *"}, array={"size": 4}))
    s.step()
    assert s.call("GET", "/api/runs/nightly/workers").json()["items"] == []
    arrayed = s.call("GET", "/api/runs/arrayed").json()["status"]
    assert (arrayed["workers"], arrayed["state"]) == (0, "Pending")
    assert arrayed["reason"].startswith("Waiting for its schedule ('0 3 * * *', UTC)")
    run_for(s, 40)  # 02:00 comes: nightly-20261202-0200 is made, and it has its worker
    workers = s.call("GET", "/api/workers").json()["items"]
    assert [(w["run"], w["state"]) for w in workers] == [("nightly-20261202-0200", "Running")]
    assert s.call("GET", "/api/runs/nightly/workers").json()["items"] == []
