"""``spec.schedule``: the words of a bad cron or timezone, and when a schedule makes a run, on
the simulated clock (CronJob semantics: missed times start once; ``keep``; ``concurrency``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reconciler.clusters.slurm.unsupported import NO_SCHEDULE, unsupported
from reconciler.controlplane.clock import ManualClock
from reconciler.controlplane.schedules import Made, Schedule, decide
from reconciler.runspec.errors import InvalidSpec
from reconciler.runspec.parse import parse_run

START = datetime(2026, 12, 2, 1, 59, 30, tzinfo=UTC).timestamp()


def _doc(**schedule) -> dict:
    return {
        "metadata": {"name": "nightly"},
        "spec": {"schedule": schedule, "task_template": {"image": "x", "command": "true"}},
    }


def test_a_bad_cron_or_timezone_is_refused_in_words_at_its_field():
    with pytest.raises(InvalidSpec) as bad:
        parse_run(_doc(cron="0 25 * * *"))
    assert str(bad.value) == (
        "spec.schedule.cron: '0 25 * * *' is not a cron schedule: give five fields, minute hour "
        'day-of-month month day-of-week ("0 2 * * *" is every day at 02:00)'
    )
    with pytest.raises(InvalidSpec) as bad:
        parse_run(_doc(cron="0 2 * * *", timezone="Mars/Base"))
    assert str(bad.value) == (
        "spec.schedule.timezone: 'Mars/Base' is not a timezone: give an IANA name such as Europe/Paris or UTC"
    )
    good = parse_run(_doc(cron="0 2 * * *", timezone="Europe/Paris", concurrency="Replace", keep=5))
    assert good.spec.schedule is not None and good.spec.schedule.keep == 5


def test_slurm_refuses_a_schedule_in_words():
    run = parse_run(_doc(cron="0 2 * * *"))
    assert [(str(e.path), e.message) for e in unsupported(run)] == [("spec.schedule", NO_SCHEDULE)]


class Server:
    """A server ticking its schedule every 10 s on the simulated clock; its runs end at once."""

    def __init__(self, schedule: Schedule):
        self.clock, self.schedule = ManualClock(START), schedule
        self.last, self.made, self.deleted, self.created = START, [], [], []

    def run_for(self, seconds: float) -> None:
        for _ in range(int(seconds // 10)):
            self.clock.advance(10)
            self.made = [Made(m.name, m.created_at, True) for m in self.made]  # each ran its 10 s
            tick = decide(self.schedule, self.last, self.clock.now(), self.made)
            self.made = [m for m in self.made if m.name not in tick.delete]
            self.deleted += tick.delete
            if tick.acted is not None:
                self.last = tick.acted
            if tick.create:
                self.created.append(tick.create)
                self.made.append(Made(tick.create, self.clock.now(), False))

    def down_for(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def names(self) -> list[str]:
        return [m.name for m in self.made]


def test_every_minute_makes_one_run_a_minute_and_keeps_the_newest_finished():
    server = Server(Schedule("nightly", "* * * * *", keep=2))
    server.run_for(180)
    assert server.created == ["nightly-20261202-0200", "nightly-20261202-0201", "nightly-20261202-0202"]
    server.run_for(60)
    assert server.created[-1] == "nightly-20261202-0203" and len(server.created) == 4
    assert server.names() == ["nightly-20261202-0202", "nightly-20261202-0203"]  # keep: 2 finished
    assert server.deleted == ["nightly-20261202-0200", "nightly-20261202-0201"]


def test_five_minutes_down_make_one_catch_up_run_not_five():
    server = Server(Schedule("nightly", "* * * * *", keep=10))
    server.run_for(60)
    assert server.names() == ["nightly-20261202-0200"]
    server.down_for(300)
    server.run_for(10)
    assert server.names() == ["nightly-20261202-0200", "nightly-20261202-0205"]
    server.run_for(60)
    assert server.names()[-1] == "nightly-20261202-0206" and len(server.names()) == 3


def test_the_schedule_s_timezone_names_the_run_and_suspended_makes_nothing():
    paris = Schedule("nightly", "0 3 * * *", timezone="Europe/Paris")
    due = datetime(2026, 12, 2, 2, 0, tzinfo=UTC).timestamp()  # 03:00 in Paris
    assert decide(paris, due - 60, due + 5, []).create == "nightly-20261202-0300"
    assert decide(Schedule("nightly", "* * * * *", suspended=True), START, START + 600, []).create is None


def test_concurrency_forbid_skips_in_words_allow_runs_both_replace_stops_the_going_one():
    going = [Made("nightly-20261202-0200", START, False)]
    now = START + 95  # 02:01:05
    forbid = decide(Schedule("nightly", "* * * * *"), START + 30, now, going)
    assert (forbid.create, forbid.skipped) == (
        None,
        "nightly: the run of 20261202-0201 is skipped: nightly-20261202-0200 is still going",
    )
    allow = decide(Schedule("nightly", "* * * * *", concurrency="Allow"), START + 30, now, going)
    assert (allow.create, allow.stop) == ("nightly-20261202-0201", ())
    replace = decide(Schedule("nightly", "* * * * *", concurrency="Replace"), START + 30, now, going)
    assert (replace.create, replace.stop) == ("nightly-20261202-0201", ("nightly-20261202-0200",))
