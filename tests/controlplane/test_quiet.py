"""The tick's memo of quiet runs (``scheduler.quiet``): a long queue passed over, the same decisions.

Every tick of these simulations is decided twice, by ``plan_tick(state, now, quiet=False)`` (every
run visited) and by ``plan_tick(state, now)`` (the runs whose answer cannot have changed passed
over), and the two must be equal, decision for decision and in order; the memo's decisions are
then the ones applied. Time is simulated (``Simulation``): no test waits.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.controlplane import Outcome, Simulation, simulation
from reconciler.controlplane.inventory import Inventory, Machine, load_inventory
from reconciler.controlplane.scheduler import HOLDING, PlaceWorker, RunState, WorkerState, plan_tick, queue

from .helpers import doc, places, run_marks

FOREVER = Outcome(after=None)


class Twin:
    """Counts what the two paths did: ticks compared, and active runs each one served (visited)."""

    def __init__(self) -> None:
        self.ticks = 0
        self.served = {"plain": 0, "quiet": 0}


@contextmanager
def twin() -> Iterator[Twin]:
    """Every tick of a ``Simulation`` decided by both paths, held equal; the counts."""
    seen = Twin()
    path = ["plain"]
    real_serve = queue.serve

    def counting_serve(t, r):
        if r.name in t.s.active:
            seen.served[path[0]] += 1
        return real_serve(t, r)

    def both(state, now):
        path[0] = "plain"
        plain = plan_tick(state, now, quiet=False)
        path[0] = "quiet"
        fast = plan_tick(state, now)
        assert fast == plain, (
            f"at t={now}: the memo decided\n{fast}\nwhere visiting every run decides\n{plain}"
        )
        seen.ticks += 1
        return fast

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(queue, "serve", counting_serve)
        mp.setattr(simulation, "plan_tick", both)
        yield seen


def cluster(n: int = 1, gpus: int = 4) -> Inventory:
    return load_inventory(
        {"defaults": {"gpus": gpus, "rack": "r"}, "machines": [{"name": f"m{i}"} for i in range(n)]}
    )


# ---- focused cases ----------------------------------------------------------------------------------


def test_freed_room_goes_to_the_highest_priority_waiting_copy():
    """Three arrays of 30 queue behind a run holding the whole machine; when it ends, the array
    of the highest priority takes the room, then the next, in priority order, never two at once."""
    with twin() as seen:
        sim = Simulation(cluster(gpus=4), default=Outcome(after=60.0))
        sim.submit(doc("hold", 4, priority=5), outcome=Outcome(after=100.0))
        for name, priority in (("low", 0), ("high", 3), ("mid", 1)):
            sim.submit(doc(name, 1, array={"size": 30}, priority=priority))
        assert {sim.run(n).state for n in ("low", "high", "mid")} == {RunState.PENDING}
        sim.run_until_done()
    order = [sim.worker(d.worker).run for _, d in sim.log if isinstance(d, PlaceWorker)]
    assert order[0] == "hold"
    assert order[1:] == ["high"] * 30 + ["mid"] * 30 + ["low"] * 30
    assert all(sim.run(n).state is RunState.COMPLETED for n in ("low", "high", "mid"))
    assert seen.served["quiet"] < seen.served["plain"]  # the memo passed runs over


def test_many_waiting_copies_keep_max_parallel():
    """Ten arrays of 40 copies with max_parallel 3 on 16 GPUs: never more than 3 copies of one
    array hold GPUs, the room is used (five arrays at their cap, one more GPU), all complete."""
    peaks: dict[str, int] = {}

    def watch(s: Simulation, _decisions) -> None:
        for r in s.state.runs:
            peaks[r] = max(peaks.get(r, 0), sum(w.state in HOLDING for w in s.workers(r)))

    with twin():
        sim = Simulation(cluster(n=2, gpus=8), default=Outcome(after=60.0), observer=watch)
        for i in range(10):
            sim.submit(doc(f"a{i}", 1, array={"size": 40, "max_parallel": 3}))
        assert sum(w.state in HOLDING for w in sim.state.workers.values()) == 16
        assert [sim.task_counts(f"a{i}").get("Running", 0) for i in range(10)] == [3] * 5 + [1] + [0] * 4
        waiting = [w for w in sim.workers("a9") if w.state is WorkerState.PENDING]
        assert waiting[0].reason == "Waiting behind run a5, queued ahead of it"
        sim.run_until_done()
    assert set(peaks.values()) == {3}
    assert all(sim.run(f"a{i}").state is RunState.COMPLETED for i in range(10))


def test_a_run_that_could_backfill_waits_behind_once_its_time_is_too_long():
    """A run that may backfill (it would end before the blocked run could start) waits for room;
    once the time left before that start is shorter than its limit, it waits behind instead,
    though nothing else changed: the memo's answer for it runs out with time."""
    with twin():
        sim = Simulation(cluster(gpus=8), default=FOREVER)
        sim.advance(10)
        sim.submit(doc("long", 8, time_limit=1000))  # ends by 1010 at the latest
        sim.submit(doc("big", 8))  # blocked for room: it could start at 1010
        sim.submit(doc("short", 4, time_limit=500))
        assert sim.run("short").reason == "Waiting for room: 4 GPUs on one network"
        sim.advance(499)  # at 509, it would still end by 1009
        assert sim.run("short").reason == "Waiting for room: 4 GPUs on one network"
        sim.advance(2)
    assert sim.run("short").reason == "Waiting behind run big, queued ahead of it"
    assert [t for t, _ in run_marks(sim, "short")][-1] == 511


def gpus(n: int) -> dict:
    return {"gpu_requests": {"count": n}}


def test_a_worker_out_of_its_backoff_is_placed_though_the_one_after_it_finds_no_room():
    """A run's first waiting worker is in its backoff, its second waits for 4 GPUs where 2 are
    free: when the backoff ends, the first (1 GPU) is placed, though the run's answer (no room
    for 4) would otherwise hold: the memo's answer runs out with the backoff."""
    groups = {
        "metadata": {"name": "tg"},
        "spec": {
            "start": "Independent",
            "task_groups": [
                {"name": "a", "task_template": {"image": "i", "requested_resources": gpus(1)}},
                {"name": "b", "replicas": 2, "task_template": {"image": "i", "requested_resources": gpus(4)}},
            ],
        },
    }
    fail = Outcome(exit_code=1, after=1.0)
    with twin():
        sim = Simulation(cluster(gpus=9), default=FOREVER)
        # tg-a-0 fails at 1 (back at 11) and at 12 (back at 32); tg-b-1 fails at 13 (back at 23)
        sim.submit(groups, scripts={"tg-a-0": [fail, fail, FOREVER], "tg-b-1": [Outcome(1, 13.0), FOREVER]})
        sim.submit(doc("c", 3))  # takes 3 of the 5 GPUs free at 13
        sim.advance(30)
        assert sim.task_counts("c") == {"Running": 1}
        # the run's next waiting worker (tg-a-0, in its backoff) says what the run waits for
        assert sim.worker("tg-a-0").reason == "Waiting for room: 4 GPUs, 1 cores on one machine"
        assert sim.worker("tg-b-1").state is WorkerState.PENDING
        sim.advance(2)
    assert [t for t, _ in places(sim, "tg-a-0")] == [0, 11, 32]
    assert sim.worker("tg-b-1").state is WorkerState.PENDING


# ---- random clusters and queues ---------------------------------------------------------------------


@st.composite
def small_clusters(draw) -> Inventory:
    out = []
    for i in range(draw(st.integers(1, 3))):
        gpus = draw(st.integers(1, 8))
        out.append(
            Machine(
                name=f"m{i}",
                gpus=gpus,
                healthy_gpus=draw(st.integers(0, gpus)),
                cpu_cores=draw(st.sampled_from([8, 64])),
                memory_bytes=256 * 1024**3,
                rack="r0",
                fabric=f"ib{i % 2}",
                nvlink_domain=f"nvl{i}",
                rdma_network="roce",
            )
        )
    return Inventory(tuple(out))


@st.composite
def queued_runs(draw, i: int):
    kind = draw(st.sampled_from(["single", "single", "gang", "array", "array", "minavail", "shape"]))
    gpus = draw(st.integers(1, 4))
    common = {
        "restart_policy": draw(st.sampled_from(["OnFailure", "Never"])),
        "time_limit": draw(st.sampled_from([None, 40, 300, 3600])),
        "cpu": draw(st.sampled_from([None, 2, 16])),
        "priority": draw(st.integers(0, 2)),
    }
    if draw(st.integers(0, 5)) == 0:
        common["gpu"] = {"healthy_only": True}
    name = f"q{i}"
    if kind == "single":
        d = doc(name, gpus, resources={"machines": 1}, **common)
    elif kind == "shape":
        d = doc(name, gpus * 2, **common)
    elif kind == "gang":
        d = doc(name, gpus * 2, resources={"machines": 2}, start="Gang", **common)
    elif kind == "minavail":
        d = doc(name, 3, resources={"machines": 3}, start="MinAvailable", min_available=2, **common)
    else:
        size = draw(st.integers(1, 10))
        d = doc(name, gpus, array={"size": size, "max_parallel": draw(st.integers(0, size))}, **common)
    if draw(st.integers(0, 6)) == 0:
        d["spec"]["task_template"]["datavolume_refs"] = [{"name": "data", "mount_path": "/data"}]
    outcome = Outcome(
        exit_code=draw(st.sampled_from([0, 0, 1])),
        after=draw(st.sampled_from([5.0, 60.0, 700.0, None])),
        prepare=draw(st.sampled_from([0.0, 0.0, 30.0])),
    )
    workspace = draw(st.sampled_from([None, None, "team-a"]))
    return d, outcome, workspace


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_clusters(), st.data())
def test_a_long_queue_on_a_small_cluster_is_decided_the_same_with_the_memo(inventory, data):
    with twin() as seen:
        sim = Simulation(inventory)
        if data.draw(st.booleans()):
            sim.state.no_sandbox = "no sandbox here: a run with drives waits"
        if data.draw(st.booleans()):
            gpus = data.draw(st.sampled_from([None, 1, 3, 6]))  # and runs holding machines
            sim.set_quota("team-a", gpus=gpus, runs=data.draw(st.sampled_from([None, 0, 1, 2])))
        if data.draw(st.booleans()):  # a machine goes silent, and may come back
            silent = inventory.machines[0].name
            sim.machine_unreachable(silent, at=data.draw(st.sampled_from([20.0, 200.0])))
            sim.machine_back(silent, at=data.draw(st.sampled_from([150.0, 900.0])))
        for wave in range(data.draw(st.integers(1, 3))):
            for i in range(data.draw(st.integers(2, 10))):
                d, outcome, workspace = data.draw(queued_runs(wave * 100 + i))
                sim.submit(d, outcome=outcome, workspace=workspace)
            sim.advance(data.draw(st.sampled_from([0.0, 30.0, 400.0])))
            if data.draw(st.integers(0, 3)) == 0:
                sim.cancel(next(iter(sim.state.runs)))
        sim.advance(4 * 3600)
    assert seen.ticks > 0
    for r in sim.state.runs.values():
        assert r.reason
