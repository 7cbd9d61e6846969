"""Retry rules by exit code (``task_template.on_exit_codes``), on the simulated clock: FailJob fails
the run at once, RestartIgnoreBudget restarts past the seeds' 10, and the reason names the rule."""

from reconciler.controlplane import Outcome, Simulation
from reconciler.controlplane.inventory import load_inventory
from reconciler.controlplane.scheduler import RunState, WorkerState

from .helpers import doc, requeues, starts

RULES = [{"codes": [3], "action": "FailJob"}, {"codes": [137, 143], "action": "RestartIgnoreBudget"}]


def one_machine():
    return load_inventory({"defaults": {"gpus": 8, "rack": "r"}, "machines": [{"name": "m0"}]})


def ruled(name: str, **spec) -> dict:
    d = doc(name, 1, **spec)
    d["spec"]["task_template"]["on_exit_codes"] = RULES
    return d


def test_an_exit_code_with_failjob_fails_the_run_at_once_saying_which_rule():
    sim = Simulation(one_machine(), default=Outcome(exit_code=3, after=5))
    sim.submit(ruled("bad-input"))
    sim.run_until_done()
    assert len(starts(sim, "bad-input-0")) == 1  # OnFailure would have restarted it 10 times
    w, r = sim.worker("bad-input-0"), sim.run("bad-input")
    assert (w.state, w.reason) == (WorkerState.FAILED, "Exited with code 3 (on_exit_codes[0]: FailJob)")
    assert r.state is RunState.FAILED
    assert r.reason == "Worker bad-input-0 failed on m0: Exited with code 3 (on_exit_codes[0]: FailJob)"


def test_failjob_fails_an_array_at_once_too():
    sim = Simulation(one_machine(), default=Outcome(exit_code=0, after=600))
    d = ruled("sweep", array={"size": 4, "max_parallel": 4})
    sim.submit(d, scripts={"sweep-1": Outcome(exit_code=3, after=5)})
    sim.advance(30)
    assert sim.run("sweep").state is RunState.FAILED
    assert sim.worker("sweep-0").state is not WorkerState.RUNNING  # the others are stopped


def test_restart_ignore_budget_restarts_past_the_seeds_ten_without_spending():
    sim = Simulation(one_machine())
    script = [Outcome(exit_code=137, after=5)] * 15 + [Outcome(exit_code=0, after=5)]
    sim.submit(ruled("oom"), scripts={"oom-0": script})
    sim.run_until_done()
    assert len(starts(sim, "oom-0")) == 16 and sim.run("oom").state is RunState.COMPLETED
    (_, first), *_ = requeues(sim, "oom-0")
    assert first.restarts == 0
    assert first.reason == (
        "Exited with code 137 (on_exit_codes[1]: RestartIgnoreBudget); "
        "restarting in 10 s, the restart budget kept (0 of 10 spent)"
    )
    assert sim.worker("oom-0").restarts == 0


def test_a_code_no_rule_names_spends_the_budget_as_the_seeds_say():
    sim = Simulation(one_machine(), default=Outcome(exit_code=1, after=5))
    sim.submit(ruled("crash"))
    sim.run_until_done()
    assert len(starts(sim, "crash-0")) == 11 and sim.worker("crash-0").restarts == 10


def test_restart_ignore_budget_in_a_restartjob_run_counts_no_job_restart():
    sim = Simulation(
        load_inventory({"defaults": {"gpus": 8, "rack": "r"}, "machines": [{"name": "m0"}, {"name": "m1"}]})
    )
    d = doc("job", 16, on_failure="RestartJob")
    d["spec"]["task_template"]["on_exit_codes"] = RULES
    sim.submit(d, scripts={"job-1": [Outcome(143, 30), Outcome(after=None)]}, outcome=Outcome(after=None))
    sim.advance(30)
    assert sim.run("job").restarts == 0 and all(w.state is WorkerState.PENDING for w in sim.workers("job"))
    sim.advance(11)
    assert len(starts(sim, "job-0")) == 2
