"""Two ``astra watch`` loops on one source (issue 28, finding 7): one holds the lock, the other
waits and says so; neither ever exits on a stale plan: it plans again.

The race is made, not waited for: loop A's store lets loop B run a whole pass at the moment A
has planned and is about to take the lock to apply (what happened in 2 of 8 starts by chance).
No sleeps; the clock is the test's.
"""

from __future__ import annotations

import random

import pytest

from reconciler.loop import Reconciler, Watch
from reconciler.state import Lock
from tests.plan.conftest import NOW, World


class Clock:
    def __init__(self) -> None:
        self.t = NOW

    def __call__(self) -> float:
        return self.t


class RacedStore:
    """A source store that runs ``meanwhile`` once, just before the first lock it is asked for."""

    def __init__(self, store, meanwhile) -> None:
        self._store, self._meanwhile = store, meanwhile

    def lock(self, name: str, who: str, now: float) -> Lock:
        if self._meanwhile is not None:
            meanwhile, self._meanwhile = self._meanwhile, None
            meanwhile()
        return self._store.lock(name, who, now)

    def __getattr__(self, name: str):
        return getattr(self._store, name)


@pytest.fixture
def world(tmp_path, monkeypatch) -> World:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ASTRA_HOME", str(tmp_path / ".astra"))
    monkeypatch.delenv("ASTRA_TEMPLATE_PATH", raising=False)
    return World(tmp_path)


def loop(world: World, store, clock: Clock, who: str) -> Reconciler:
    return Reconciler(
        world.source(), world.cluster, store, clock=clock, who=who, cache=world.cache, rng=random.Random(1)
    )


def test_a_loop_whose_plan_another_loop_made_stale_plans_again_and_is_ready(world):
    for name in ("h3-0", "h3-1"):
        world.run(name)
    clock = Clock()
    b = loop(world, world.store, clock, "loop-b@h:2")
    statuses_of_b = []
    a = loop(
        world, RacedStore(world.store, lambda: statuses_of_b.append(b.reconcile_once())), clock, "loop-a@h:1"
    )
    events = iter([set(), None])  # one look (the first pass is due at once: a full one), then stop
    said: list[dict] = []
    watch = Watch(a, lambda _timeout: next(events), clock=clock, interval=60.0, on_status=said.append)

    watch.run()  # returns once the events end: a StalePlan would have ended it first

    assert [s["state"] for s in statuses_of_b] == ["Ready"]  # B ran whole, inside A's pass
    [status] = said
    assert (status["state"], status["reason"]) == ("Ready", "ReconciliationSucceeded"), status
    assert world.cluster.names() == ["h3-0", "h3-1"]
    state = world.store.read("test")
    assert sorted(state.inventory) == ["h3-0", "h3-1"]
    assert state.lock is None
    assert [(h.who, h.result) for h in state.history] == [("loop-b@h:2", "applied")], (
        "a stale plan left a failed apply"
    )
    assert [c.action.value for c in a.last_plan.changes] == ["noop", "noop"]


def test_a_loop_that_finds_the_lock_held_waits_and_says_by_whom(world):
    world.run("h3-0")
    clock = Clock()
    holder = world.store.lock("test", "loop-a@h:1", NOW - 5)
    b = loop(world, world.store, clock, "loop-b@h:2")
    status = b.reconcile_once()
    assert (status["state"], status["reason"]) == ("Reconciling", "Locked")
    assert "loop-a@h:1" in status["message"] and holder.id in status["message"]
    assert world.cluster.names() == []
    assert b.retry_at is not None and b.retry_at > clock()  # waits, then tries again
    world.store.unlock("test", holder.id)
    clock.t = b.retry_at
    assert b.reconcile_once()["state"] == "Ready"
    assert world.cluster.names() == ["h3-0"]
