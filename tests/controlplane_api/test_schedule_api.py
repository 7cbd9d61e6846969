"""``spec.schedule`` at the API: a bad cron or timezone, or a name too long for the runs it
makes, is a 422 in the spec layer's words; a good one is accepted (201) and holds no workers."""

from __future__ import annotations

from .test_api import tiny


def test_a_bad_cron_or_timezone_is_a_422_in_words(client):
    r = client.post("/api/runs", json=tiny("nightly", schedule={"cron": "61 * * * *", "timezone": "Nowhere"}))
    assert r.status_code == 422
    assert r.json() == [
        {
            "path": "spec.schedule.cron",
            "message": "'61 * * * *' is not a cron schedule: give five fields, minute hour day-of-month "
            'month day-of-week ("0 2 * * *" is every day at 02:00)',
        },
        {
            "path": "spec.schedule.timezone",
            "message": "'Nowhere' is not a timezone: give an IANA name such as Europe/Paris or UTC",
        },
    ]


def test_a_name_too_long_for_the_runs_it_makes_is_a_422_in_words(client):
    name = "n" * 45
    r = client.post("/api/runs", json=tiny(name, schedule={"cron": "0 2 * * *"}))
    assert (r.status_code, r.json()) == (
        422,
        [
            {
                "path": "metadata.name",
                "message": f"a run on a schedule makes runs named {name}-YYYYMMDD-HHMM: its name may "
                "have at most 44 characters (it has 45)",
            }
        ],
    )


def test_a_good_schedule_is_accepted_and_holds_no_workers(client):
    r = client.post("/api/runs", json=tiny("nightly", schedule={"cron": "0 2 * * *"}))
    assert r.status_code == 201, r.text
    client.plane.step()
    run = client.get("/api/runs/nightly").json()
    assert (run["status"]["state"], run["status"]["gpus_held"]) == ("Pending", 0)
    assert run["status"]["schedule"]["cron"] == "0 2 * * *"
