"""A run says at its own level what its workers go through while they restart (issue 32).

A crash-looping worker's run no longer says ``Waiting in the queue``: its reason names how many
workers are restarting, which one, and that worker's own words; the state stays the seeds'
(Pending while no worker runs, Running while one does). Time is the simulation's.
"""

from __future__ import annotations

from reconciler.controlplane import Outcome, Simulation
from reconciler.controlplane.inventory import load_inventory
from reconciler.controlplane.scheduler import RunState

from .helpers import doc

FOREVER = Outcome(after=None)


def small(n: int = 1):
    return load_inventory({"defaults": {"gpus": 8}, "machines": [{"name": f"m{i}"} for i in range(n)]})


def test_a_crash_looping_run_says_its_worker_restarts_not_waiting_in_the_queue():
    sim = Simulation(small(), default=Outcome(exit_code=2, after=1))
    sim.submit(doc("crashloop", 1))
    sim.advance(1)
    r = sim.run("crashloop")
    assert r.state is RunState.PENDING
    assert r.reason == (
        "1 of 1 workers restarting: Worker crashloop-0: Exited with code 2; restart 1 of 10 in 10 s"
    )
    sim.advance(11 + 1 + 20)
    assert sim.run("crashloop").reason == (
        "1 of 1 workers restarting: Worker crashloop-0: Exited with code 2; restart 3 of 10 in 40 s"
    )


def test_an_array_names_its_copy_with_the_most_restarts_and_stays_running_while_others_run():
    sim = Simulation(small(), default=FOREVER)
    bad = [Outcome(exit_code=2, after=1)] * 3 + [FOREVER]
    sim.submit(
        doc("sweep", 1, array={"size": 4, "max_parallel": 0}),
        scripts={"sweep-2": bad, "sweep-3": [Outcome(exit_code=1, after=1), FOREVER]},
    )
    sim.advance(1)
    r = sim.run("sweep")
    assert r.state is RunState.RUNNING
    assert r.reason == (
        "Workers 2 running of 4; 2 of 4 workers restarting: Worker sweep-2: "
        "Exited with code 2; restart 1 of 10 in 10 s"
    )
    sim.advance(11)  # sweep-3 runs for good; sweep-2 failed again
    assert sim.run("sweep").reason == (
        "Workers 3 running of 4; 1 of 4 workers restarting: Worker sweep-2: "
        "Exited with code 2; restart 2 of 10 in 20 s"
    )
    sim.advance(21 + 41)
    assert sim.run("sweep").reason == "Workers 4 running of 4"


def test_a_run_whose_restarted_worker_runs_again_says_so():
    sim = Simulation(small(), default=FOREVER)
    sim.submit(doc("flaky", 1), scripts={"flaky-0": [Outcome(exit_code=1, after=5), FOREVER]})
    sim.advance(5)
    assert sim.run("flaky").reason.startswith("1 of 1 workers restarting: Worker flaky-0: Exited with code 1")
    sim.advance(10)
    assert (sim.run("flaky").state, sim.run("flaky").reason) == (RunState.RUNNING, "Workers 1 running of 1")


def test_the_seeds_sweep_says_its_copies_restart_while_the_others_wait_at_the_cap():
    sim = Simulation(small(), default=FOREVER)
    sim.submit(
        doc("sweep", 1, array={"size": 100, "max_parallel": 8}),
        scripts={"sweep-3": [Outcome(exit_code=2, after=5), FOREVER]},
    )
    sim.advance(5)
    r = sim.run("sweep")
    assert r.state is RunState.RUNNING
    assert r.reason == (
        "Workers 8 running of 100; 1 of 100 workers restarting: Worker sweep-3: "
        "Exited with code 2; restart 1 of 10 in 10 s"
    )
