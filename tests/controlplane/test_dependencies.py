"""Runs that wait for runs (``spec.depends_on``), on the simulated clock: a chain runs in order,
a dependency that can no longer be met fails the runs after it in words, a cycle is said."""

from reconciler.controlplane import Outcome, Simulation
from reconciler.controlplane.inventory import load_inventory
from reconciler.controlplane.scheduler import RunState

from .helpers import doc, starts


def machines():
    return load_inventory(
        {"defaults": {"gpus": 8, "rack": "r"}, "machines": [{"name": "m0"}, {"name": "m1"}]}
    )


def after(name: str, *deps: str, when: str = "Completed") -> dict:
    d = doc(name, 1, restart_policy="Never")
    if deps:
        d["spec"]["depends_on"] = [{"run": dep, "when": when} for dep in deps]
    return d


def test_a_chain_applied_at_once_runs_in_order():
    sim = Simulation(machines(), default=Outcome(exit_code=0, after=60))
    sim.submit(after("evaluate", "train"))  # made first, as one apply may make them
    sim.submit(after("train", "preprocess"))
    sim.advance(1)
    assert sim.run("evaluate").reason == "Waiting for run train (Pending)"
    assert sim.run("train").reason == "Waiting for run preprocess (not created yet)"
    sim.submit(after("preprocess"))
    sim.advance(30)
    assert sim.run("train").reason == "Waiting for run preprocess (Running)"
    sim.run_until_done()
    first = {n: starts(sim, f"{n}-0")[0] for n in ("preprocess", "train", "evaluate")}
    assert first["preprocess"] + 60 <= first["train"] and first["train"] + 60 <= first["evaluate"]
    assert all(sim.run(n).state is RunState.COMPLETED for n in first)


def test_a_failing_first_run_fails_the_rest_with_words():
    sim = Simulation(machines(), default=Outcome(exit_code=0, after=60))
    sim.submit(after("preprocess"), outcome=Outcome(exit_code=1, after=10))
    sim.submit(after("train", "preprocess"))
    sim.submit(after("evaluate", "train"))
    sim.run_until_done()
    assert sim.run("train").state is RunState.FAILED
    assert sim.run("train").reason == "Run preprocess ended Failed; this run needs it Completed"
    assert sim.run("evaluate").reason == "Run train ended Failed; this run needs it Completed"
    assert starts(sim, "train-0") == [] and starts(sim, "evaluate-0") == []


def test_when_failed_and_finished():
    sim = Simulation(machines(), default=Outcome(exit_code=0, after=5))
    sim.submit(after("first"), outcome=Outcome(exit_code=1, after=10))
    sim.submit(after("on-failure", "first", when="Failed"))
    sim.submit(after("cleanup", "first", when="Finished"))
    sim.submit(after("needs-ok", "first"))
    sim.run_until_done()
    assert sim.run("on-failure").state is RunState.COMPLETED
    assert sim.run("cleanup").state is RunState.COMPLETED
    assert sim.run("needs-ok").state is RunState.FAILED


def test_runs_waiting_for_each_other_fail_naming_the_cycle():
    sim = Simulation(machines(), default=Outcome(exit_code=0, after=5))
    sim.submit(after("a", "b"))
    sim.submit(after("b", "a"))
    sim.advance(1)
    assert sim.run("a").state is RunState.FAILED and sim.run("a").reason == "Runs a, b wait for each other"


def test_once_the_wait_is_over_no_waiting_copy_still_says_it_waits():
    """An array capped below its size: the copies that wait for the cap say so, or that they are
    queued, not the dependency that has since been met."""
    sim = Simulation(machines(), default=Outcome(exit_code=0, after=60))
    sim.submit(after("preprocess"))
    sweep = doc("sweep", 1, restart_policy="Never", array={"size": 20, "max_parallel": 4})
    sweep["spec"]["depends_on"] = [{"run": "preprocess"}]
    sim.submit(sweep)
    sim.advance(30)
    assert {w.reason for w in sim.workers("sweep")} == {"Waiting for run preprocess (Running)"}
    sim.advance(35)  # preprocess has completed: four copies run, the rest wait at the cap
    reasons = [w.reason for w in sim.workers("sweep") if w.state.value == "Pending"]
    assert len(reasons) == 16
    assert set(reasons) <= {"Array runs at most 4 workers at once", "Waiting in the queue"}, set(reasons)
