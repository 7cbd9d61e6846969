"""``spec.schedule`` at the API: a bad cron or timezone is a 422 in the spec layer's words; a
good one is refused in words (the server makes no scheduled run yet) rather than run once now."""

from __future__ import annotations

from reconciler.runspec.schedules import NOT_SERVED

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


def test_a_good_schedule_is_refused_in_words_not_run_once(client):
    r = client.post("/api/runs", json=tiny("nightly", schedule={"cron": "0 2 * * *"}))
    assert (r.status_code, r.json()) == (422, [{"path": "spec.schedule", "message": NOT_SERVED}])
    assert client.get("/api/runs").json()["items"] == []
