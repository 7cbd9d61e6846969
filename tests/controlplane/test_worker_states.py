"""The seeds' worker states beyond the run's: Preparing, Pulling, ReadyToStart, Stale, Down (seed 000).

Pulling sits between Preparing and ReadyToStart with the reason ``Pulling image IMAGE``; a Stale
worker (its machine stopped reporting) is Down after ``STALE_TIMEOUT_SECONDS``, counted as lost,
and restarted as a lost worker is. Time is the simulation's.
"""

from __future__ import annotations

from reconciler.controlplane import Outcome, Simulation
from reconciler.controlplane.inventory import load_inventory
from reconciler.controlplane.scheduler import (
    STALE_TIMEOUT_SECONDS,
    LoseWorker,
    RunState,
    WorkerState,
)

from .helpers import doc, places, requeues

FOREVER = Outcome(after=None)
LOST = "Machine m0 stopped reporting 5 min ago; counted as lost"


def small(n: int = 2):
    return load_inventory({"defaults": {"gpus": 8}, "machines": [{"name": f"m{i}"} for i in range(n)]})


def state_of(sim: Simulation, worker: str) -> tuple[str, str]:
    w = sim.worker(worker)
    return str(w.state), w.reason


# ---- Pulling -------------------------------------------------------------------------------------


def test_pulling_comes_between_preparing_and_ready_to_start_with_its_reason():
    sim = Simulation(small(), default=FOREVER)
    sim.submit(doc("p", 4, start="Gang"), outcome=Outcome(after=None, prepare=5, pull=30))
    assert state_of(sim, "p-0") == ("Preparing", "Preparing on m0")
    sim.advance(5)
    assert state_of(sim, "p-0") == ("Pulling", "Pulling image busybox")
    assert sim.task_counts("p") == {"Pulling": 1}
    sim.advance(29)
    assert sim.worker("p-0").state is WorkerState.PULLING
    sim.advance(1)
    assert state_of(sim, "p-0") == ("Running", "Container running")


def test_a_pulling_worker_holds_its_place():
    sim = Simulation(small(1), default=FOREVER)
    sim.submit(doc("p", 8), outcome=Outcome(after=None, pull=600))
    sim.submit(doc("next", 8))
    assert sim.worker("p-0").state is WorkerState.PULLING
    assert sim.run("next").state is RunState.PENDING and sim.workers("next") == []


def test_a_gang_waits_at_the_barrier_for_a_pulling_worker_and_a_pull_that_never_ends_restarts_it():
    sim = Simulation(small(2), default=FOREVER)
    sim.submit(doc("g", 16), scripts={"g-1": [Outcome(after=None, pull=None), FOREVER]})
    assert [w.state for w in sim.workers("g")] == [WorkerState.READY, WorkerState.PULLING]
    assert sim.run("g").state is RunState.STARTING
    sim.advance(15 * 60)
    r = sim.run("g")
    assert r.state is RunState.PENDING and r.restarts == 1
    assert r.reason.startswith("Gang barrier: 1 of 2 workers not ready after 15 minutes")


def test_an_image_already_there_is_not_pulled():
    sim = Simulation(small(1), default=FOREVER)
    sim.submit(doc("p", 1))
    assert sim.worker("p-0").state is WorkerState.RUNNING
    assert not any(w.state is WorkerState.PULLING for w in sim.workers("p"))


# ---- Stale becomes Down ----------------------------------------------------------------------------


def test_stale_becomes_down_after_the_timeout_and_restarts_as_a_lost_worker():
    sim = Simulation(small(2), default=FOREVER)
    sim.submit(doc("w", 4))
    assert sim.worker("w-0").machine == "m0"
    sim.machine_unreachable("m0")
    assert state_of(sim, "w-0") == ("Stale", "Machine m0 stopped reporting")
    sim.advance(STALE_TIMEOUT_SECONDS - 1)
    assert sim.worker("w-0").state is WorkerState.STALE
    sim.advance(1)
    (lost,) = [d for _, d in sim.log if isinstance(d, LoseWorker)]
    assert lost == LoseWorker("w-0", LOST)
    w = sim.worker("w-0")
    assert (w.state, w.restarts) == (WorkerState.PENDING, 1)
    (_, requeue) = requeues(sim, "w-0")[-1]
    assert requeue.reason == f"{LOST}; restart 1 of 10 in 10 s"
    sim.advance(10)
    assert w.state is WorkerState.RUNNING and w.machine == "m1"  # m0 is silent: nothing new goes there


def test_a_stale_worker_under_never_fails_its_run_with_the_reason():
    sim = Simulation(small(2), default=FOREVER)
    sim.submit(doc("w", 4, restart_policy="Never"))
    sim.machine_unreachable("m0")
    sim.advance(STALE_TIMEOUT_SECONDS)
    assert state_of(sim, "w-0") == ("Down", LOST)
    r = sim.run("w")
    assert r.state is RunState.FAILED and r.reason == f"Worker w-0 failed on m0: {LOST}"


def test_a_machine_back_before_the_timeout_keeps_its_workers_as_they_were():
    sim = Simulation(small(2), default=FOREVER)
    sim.submit(doc("w", 4, time_limit=400))
    sim.machine_unreachable("m0", at=100)
    sim.machine_back("m0", at=200)
    sim.advance(200)
    assert state_of(sim, "w-0") == ("Running", "Container running")
    sim.advance(STALE_TIMEOUT_SECONDS)  # past the first timer: nothing is lost
    assert not any(isinstance(d, LoseWorker) for _, d in sim.log)
    w = sim.worker("w-0")
    assert w.state is WorkerState.FAILED and w.reason == "Stopped at its time limit of 6m40s"  # still held


def test_silent_again_after_coming_back_starts_a_new_timeout():
    sim = Simulation(small(2), default=FOREVER)
    sim.submit(doc("w", 4))
    sim.machine_unreachable("m0", at=0)
    sim.machine_back("m0", at=200)
    sim.machine_unreachable("m0", at=250)
    sim.advance(STALE_TIMEOUT_SECONDS + 100)
    assert sim.worker("w-0").state is WorkerState.STALE  # 300 s after 0, but only 150 after 250
    sim.advance(150)
    assert [t for t, d in sim.log if isinstance(d, LoseWorker)] == [550.0]


def test_an_unreachable_machine_takes_no_new_worker_until_it_reports_again():
    sim = Simulation(small(1), default=FOREVER)
    sim.machine_unreachable("m0")
    sim.submit(doc("n", 1))
    assert places(sim, run="n") == [] and sim.run("n").state is RunState.PENDING
    sim.machine_back("m0")
    assert sim.workers("n")[0].state is WorkerState.RUNNING


def test_a_stale_preparing_worker_comes_back_preparing_and_gets_ready():
    sim = Simulation(small(1), default=FOREVER)
    sim.submit(doc("w", 1), outcome=Outcome(after=None, prepare=60))
    sim.machine_unreachable("m0", at=10)
    sim.machine_back("m0", at=20)
    sim.advance(20)
    assert state_of(sim, "w-0") == ("Preparing", "Preparing on m0")
    sim.advance(40)
    assert sim.worker("w-0").state is WorkerState.RUNNING


def test_the_stale_timeout_is_a_timer_the_driver_wakes_for():
    """No observation comes from a silent machine: ``next_wakeup`` names the timeout itself."""
    sim = Simulation(small(1), default=FOREVER)
    sim.submit(doc("w", 1))
    sim.machine_unreachable("m0", at=42)
    sim.advance(42)
    assert sim.state.next_wakeup(sim.now) == 42 + STALE_TIMEOUT_SECONDS
