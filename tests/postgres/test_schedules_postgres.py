"""A run on a schedule with the store on a real PostgreSQL (revision ``0009_schedules``): one run
a minute, and a server stopped for five minutes (the store kept, a new engine) makes one
catch-up run, not five; a suspension survives the restart too. Simulated clock, no sleeps."""

from __future__ import annotations

from datetime import UTC, datetime

from reconciler.controlplane.clock import ManualClock
from reconciler.controlplane.engine import Engine
from reconciler.controlplane.inventory import load_inventory
from reconciler.controlplane.simulation import Outcome, SimulatedExecutor
from reconciler.controlplane.store import Store

INVENTORY = {"defaults": {"gpus": 8}, "machines": [{"name": "m0"}]}
T0 = datetime(2026, 12, 2, 1, 59, 30, tzinfo=UTC).timestamp()
NIGHTLY = {
    "metadata": {"name": "nightly"},
    "spec": {
        "schedule": {"cron": "* * * * *", "keep": 10},
        "task_template": {"image": "x", "command": "true", "requested_resources": {"cpu_cores": 1}},
    },
}


def engine(url: str, clock: ManualClock) -> Engine:
    return Engine(Store(url), load_inventory(INVENTORY), SimulatedExecutor(Outcome(after=5.0)), clock.now())


def made(e: Engine) -> list[str]:
    return sorted(n for n in e.state.runs if n != "nightly")


def test_a_schedule_on_postgres_makes_one_catch_up_run_after_five_minutes_down(postgres):
    clock = ManualClock(T0)
    e = engine(postgres, clock)
    e.submit(NIGHTLY, clock.now())
    for _ in range(6):  # to 02:00:30
        clock.advance(10)
        e.step(clock.now())
    assert made(e) == ["nightly-20261202-0200"]
    e.store.close()
    clock.advance(300)
    again = engine(postgres, clock)
    again.step(clock.now())
    assert made(again) == ["nightly-20261202-0200", "nightly-20261202-0205"]
    again.schedules.suspend("nightly", "me", clock.now())
    again.store.close()
    third = engine(postgres, clock)
    assert third.schedules.status("nightly")["suspended"] is True
    clock.advance(120)
    third.step(clock.now())
    assert made(third) == ["nightly-20261202-0200", "nightly-20261202-0205"]
    third.store.close()
