"""Apply: idempotent, resumable, locked, conflict-safe, retrying only what is transient; --wait."""

from __future__ import annotations

import pytest

from reconciler.apply import apply_plan
from reconciler.clusters.base import Conflict, Unreachable
from reconciler.clusters.fake import SimulatedCrash
from reconciler.plan import Action
from reconciler.reconcile import retrying
from reconciler.state import Locked

from .conftest import NOW


def mutations(cluster):
    return [c for c in cluster.calls if c[0] in ("create", "update", "delete")]


def test_apply_twice_changes_nothing_the_second_time(world):
    for i in range(3):
        world.run(f"r{i}")
    world.converge()
    world.cluster.calls.clear()
    result = world.converge()
    assert mutations(world.cluster) == []
    assert {e.outcome for e in result.entries} == {"unchanged"}


def test_killed_midway_then_resumed_finishes_without_duplicates(world):
    for i in range(6):
        world.run(f"r{i}")
    world.cluster.crash_after("create", 2)
    with pytest.raises(SimulatedCrash):
        world.apply()
    assert world.cluster.names() == ["r0", "r1"]
    assert sorted(world.store.read("test").inventory) == ["r0", "r1"]  # recorded as each was applied
    assert world.store.read("test").lock is None
    plan = world.plan()
    assert {c.address for c in plan.changes if c.action is Action.create} == {"r2", "r3", "r4", "r5"}
    world.converge(plan=plan)
    assert world.cluster.names() == [f"r{i}" for i in range(6)]
    creates = [c for c in world.cluster.calls if c[0] == "create"]
    assert len(creates) == len({c[1] for c in creates}) == 6
    assert not world.plan().has_changes


def test_killed_between_create_and_record_counts_the_run_as_done(world, monkeypatch):
    world.run("a")
    world.run("b")
    store = world.store
    real = store.record

    def dies_on_b(name, run, entry):
        if run == "b":
            raise SimulatedCrash("killed before recording b")
        real(name, run, entry)

    monkeypatch.setattr(store, "record", dies_on_b)
    with pytest.raises(SimulatedCrash):
        world.apply()
    monkeypatch.setattr(store, "record", real)
    assert world.cluster.names() == ["a", "b"] and "b" not in store.read("test").inventory
    plan = world.plan()
    b = next(c for c in plan.changes if c.address == "b")
    assert b.action is Action.noop and "takes it over" not in b.reason
    result = world.converge(plan=plan)
    assert {e.address: e.outcome for e in result.entries} == {"a": "unchanged", "b": "recorded"}
    assert "b" in store.read("test").inventory


def test_a_create_that_finds_the_same_run_counts_as_done(world):
    world.run("a")
    plan = world.plan()
    world.cluster.create_run(plan.changes[0].after)  # someone (a killed apply) created it meanwhile
    world.cluster.calls.clear()
    # the plan is stale now: apply refuses it; a fresh plan adopts the run without a duplicate
    with pytest.raises(Exception, match="stale"):
        world.apply(plan)
    result = world.converge()
    assert [e.outcome for e in result.entries] == ["recorded"]
    assert world.cluster.calls.count(("create", "a")) == 0


def test_lock_contention(world):
    world.run("a")
    plan = world.plan()
    held = world.store.lock("test", "other@ci:42", NOW - 600)
    with pytest.raises(Locked) as refused:
        world.apply(plan)
    assert refused.value.lock.id == held.id
    message = str(refused.value)
    assert "other@ci:42" in message and "10m ago" in message and f"astra force-unlock {held.id}" in message
    assert world.cluster.names() == []
    world.store.unlock("test", held.id)  # what force-unlock does
    assert world.apply(plan).ok


def test_history_records_who_when_what_and_the_result(world):
    world.run("a")
    result = apply_plan(world.plan(), world.cluster, world.store, now=lambda: NOW, who="me@h:1", commit="abc")
    assert result.ok
    (h,) = world.store.read("test").history
    assert (h.who, h.when, h.commit, h.result) == ("me@h:1", NOW, "abc", "applied")
    assert h.summary["create"] == 1


def test_concurrent_update_is_a_conflict_not_an_overwrite(world):
    world.sweep("s", parallel=2)
    world.converge()
    world.sweep("s", parallel=3)
    plan = world.plan()
    change = plan.changes[0]
    with pytest.raises(Conflict):
        world.cluster.update_run("s", change.after, change.resource_version - 1)
    world.cluster.update_run("s", change.after, change.resource_version)  # a concurrent writer wins
    with pytest.raises(Exception, match="stale"):
        world.apply(plan)


def test_transient_failures_are_retried(world):
    world.run("a")
    cluster = retrying(world.cluster)
    world.cluster.fail_next(2)
    assert cluster.list_runs() == []
    world.cluster.fail_next(5)
    with pytest.raises(Unreachable):
        cluster.list_runs()


def test_rejected_run_fails_the_apply_with_its_message(world):
    world.run("a")
    plan = world.plan()
    bad = plan.changes[0].after
    bad["spec"]["array"] = {"size": 0}
    with pytest.raises(Exception, match=r"array\.size must be from 1 to 10000"):
        world.apply(plan)
    assert world.cluster.names() == []


def test_a_lost_answer_to_a_create_is_retried_and_counts_as_done(world):
    world.run("a")
    plan = world.plan()
    fake = world.cluster
    real = fake.create_run
    lost = []

    def create_then_lose_the_answer(document):
        run = real(document)
        if not lost:
            lost.append(run.name)
            raise Unreachable("the connection dropped after the server acted")
        return run

    fake.create_run = create_then_lose_the_answer
    result = apply_plan(plan, retrying(fake), world.store, now=lambda: NOW, who="t")
    assert result.ok
    assert [(e.outcome, e.message) for e in result.entries] == [
        ("created", "already there with this spec: counted as done")
    ]
    assert fake.names() == ["a"]


# ---- apply_source: what `astra apply` does, in one call ------------------------------------------


def test_apply_source_plans_and_applies_the_files_in_one_call(world):
    from reconciler.apply import apply_source

    world.run("a")
    world.run("b")
    done = apply_source(
        world.source(), world.cluster, world.store, cache=world.cache, now=lambda: world.now, who="lib@host:1"
    )
    assert done.ok and done.plan.summary["create"] == 2 and world.cluster.names() == ["a", "b"]
    assert {e.outcome for e in done.result.entries} == {"created"}
    assert world.store.read("test").history[-1].who == "lib@host:1"
    again = apply_source(world.source(), world.cluster, world.store, cache=world.cache, now=lambda: world.now)
    assert (
        again.ok and not again.plan.has_changes and {e.outcome for e in again.result.entries} == {"unchanged"}
    )


def test_a_plan_not_applied_under_its_lock_and_a_dry_run_change_nothing(world):
    from reconciler.apply import apply_source, locked

    world.run("a")
    with locked(world.store, "test", who="me@host:1", now=lambda: world.now):  # the user said no
        assert world.plan().summary["create"] == 1
    assert world.store.read("test").lock is None
    dry = apply_source(world.source(), world.cluster, world.store, dry_run=True)
    assert dry.ok and dry.dry_run and dry.result is None and dry.problems == []
    assert world.cluster.names() == [] and world.store.read("test").history == []


def test_apply_source_applies_a_saved_plan_only_while_it_holds(world):
    from reconciler.apply import apply_source
    from reconciler.reconcile import StalePlan

    world.run("a")
    saved = world.plan()
    done = apply_source(world.source(), world.cluster, world.store, plan=saved)
    assert done.ok and done.plan is saved and world.cluster.names() == ["a"]
    with pytest.raises(StalePlan, match="run a was created on the cluster since the plan"):
        apply_source(world.source(), world.cluster, world.store, plan=saved)


def test_apply_source_takes_the_lock_before_it_plans_and_the_caller_holds_it_while_it_asks(
    world, monkeypatch
):
    from reconciler import reconcile
    from reconciler.apply import apply_locked, apply_source, locked

    world.run("a")
    held = world.store.lock("test", "other@ci:42", NOW - 600)

    def planned(*_, **__):
        raise AssertionError("a locked source was planned")

    with monkeypatch.context() as m:
        m.setattr("reconciler.apply.plan_source", planned)
        with pytest.raises(Locked, match=f"astra force-unlock {held.id}"):
            apply_source(world.source(), world.cluster, world.store, now=lambda: world.now)
    world.store.unlock("test", held.id)

    with locked(world.store, "test", who="me@host:1", now=lambda: world.now) as lock:
        made = world.plan()
        asked = world.store.read("test").lock  # held while the user is asked
        done = apply_locked(made, world.source(), world.cluster, world.store, lock, now=lambda: world.now)
    assert asked is not None and asked.id == lock.id and asked.owner == "me@host:1"
    assert done.ok and world.cluster.names() == ["a"]
    assert world.store.read("test").history[-1].who == "me@host:1"
    assert world.store.read("test").lock is None
    world.cluster.delete_run("a")
    with pytest.raises(reconcile.LoadFailed):  # a file that does not load: the lock is let go too
        world.write("b.yaml", "metadata: {name: b}\nspec: {}\n")
        apply_source(world.source(), world.cluster, world.store, now=lambda: world.now)
    assert world.store.read("test").lock is None
    assert world.cluster.names() == []
