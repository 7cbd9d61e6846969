"""Start policies, failures, lifetime, arrays, priorities and states (seeds 000 and 001)."""

import itertools

from reconciler.controlplane import Outcome, Simulation
from reconciler.controlplane.inventory import load_inventory
from reconciler.controlplane.scheduler import (
    ClusterState,
    RunState,
    StopWorker,
    WorkerState,
    backoff_seconds,
    schedule,
    worker_env,
)
from reconciler.runspec.parse import parse_run

from .helpers import doc, places, requeues, starts

FOREVER = Outcome(after=None)


def small(n=2, gpus=8):
    return load_inventory(
        {"defaults": {"gpus": gpus, "rack": "r"}, "machines": [{"name": f"m{i}"} for i in range(n)]}
    )


# ---- start ----------------------------------------------------------------------------------


def test_gang_never_partly_running():
    sim = Simulation(default=FOREVER)
    sim.submit(doc("g", 16), scripts={"g-1": Outcome(after=None, prepare=120)})
    assert sim.run("g").state is RunState.STARTING
    assert [w.state for w in sim.workers("g")] == [WorkerState.READY, WorkerState.PREPARING]
    sim.advance(119)
    assert all(w.state is not WorkerState.RUNNING for w in sim.workers("g"))
    sim.advance(1)
    assert [w.state for w in sim.workers("g")] == [WorkerState.RUNNING] * 2
    assert starts(sim, "g-0") == starts(sim, "g-1") == [120.0]
    assert sim.run("g").state is RunState.RUNNING


def test_gang_is_placed_whole_or_not_at_all():
    sim = Simulation(small(2), default=FOREVER)
    sim.submit(doc("hold", 4))
    sim.submit(doc("g", 16, start="Gang"))
    assert sim.run("g").state is RunState.PENDING and sim.workers("g") == []


def test_gang_barrier_15_minutes_then_restarts_as_a_whole():
    sim = Simulation(default=FOREVER)
    sim.submit(doc("g", 16), scripts={"g-1": [Outcome(prepare=None), Outcome(after=None)]})
    sim.advance(15 * 60 - 1)
    assert sim.run("g").state is RunState.STARTING
    sim.advance(1)
    r = sim.run("g")
    assert r.state is RunState.PENDING and r.restarts == 1
    assert r.reason == "Gang barrier: 1 of 2 workers not ready after 15 minutes; restart 1 of 10 in 10 s"
    sim.advance(10)
    assert sim.run("g").state is RunState.RUNNING


def test_gang_barrier_fails_the_run_under_never():
    sim = Simulation(default=FOREVER)
    sim.submit(doc("g", 16, restart_policy="Never"), scripts={"g-0": Outcome(prepare=None)})
    sim.advance(15 * 60)
    r = sim.run("g")
    assert (
        r.state is RunState.FAILED and r.reason == "Gang barrier: 1 of 2 workers not ready after 15 minutes"
    )
    assert all(w.state is WorkerState.STOPPED for w in sim.workers("g"))


def test_minavailable_starts_with_min_then_the_rest_join():
    sim = Simulation(small(4), default=Outcome(after=100))
    sim.submit(doc("hold", 16, resources={"machines": 2}, start="Independent"))
    sim.submit(doc("elastic", 32, resources={"machines": 4}, start="MinAvailable", min_available=2))
    states = [w.state for w in sim.workers("elastic")]
    assert states == [WorkerState.RUNNING, WorkerState.RUNNING, WorkerState.PENDING, WorkerState.PENDING]
    sim.advance(100)
    assert sim.worker("elastic-2").state is WorkerState.RUNNING


def test_minavailable_waits_until_min_can_start_together():
    sim = Simulation(small(4), default=FOREVER)
    sim.submit(doc("hold", 24, resources={"machines": 3}, start="Independent"))
    sim.submit(doc("elastic", 32, resources={"machines": 4}, start="MinAvailable", min_available=2))
    assert all(w.state is WorkerState.PENDING for w in sim.workers("elastic"))


def test_independent_each_worker_starts_when_it_fits():
    sim = Simulation(small(2), default=FOREVER)
    sim.submit(doc("hold", 8))
    sim.submit(doc("ind", 16, resources={"machines": 2}, start="Independent"))
    assert [w.state for w in sim.workers("ind")] == [WorkerState.RUNNING, WorkerState.PENDING]


# ---- failures -------------------------------------------------------------------------------


def test_onfailure_backoff_doubles_from_10s_to_5min():
    assert [backoff_seconds(n) for n in range(1, 11)] == [10, 20, 40, 80, 160, 300, 300, 300, 300, 300]
    sim = Simulation(small(1), default=Outcome(exit_code=3, after=1))
    sim.submit(doc("crash", 1))
    sim.run_until_done()
    ts = starts(sim, "crash-0")
    assert [b - a - 1 for a, b in itertools.pairwise(ts)] == [
        10,
        20,
        40,
        80,
        160,
        300,
        300,
        300,
        300,
        300,
    ]
    w, r = sim.worker("crash-0"), sim.run("crash")
    assert w.restarts == 10 and w.state is WorkerState.FAILED and r.state is RunState.FAILED
    assert r.reason == "Worker crash-0 failed on m0: Exited with code 3; no restarts left (10 used)"


def test_onfailure_count_resets_after_10_minutes_running():
    sim = Simulation(small(1))
    sim.submit(
        doc("flaky", 1),
        scripts={"flaky-0": [Outcome(1, 5), Outcome(1, 5), Outcome(1, 600), Outcome(1, 5), Outcome(0, 5)]},
    )
    sim.run_until_done()
    assert [d.restarts for _, d in requeues(sim, "flaky-0")] == [1, 2, 1, 2]
    assert sim.run("flaky").state is RunState.COMPLETED


def test_never_does_not_restart():
    sim = Simulation(small(1), default=Outcome(exit_code=1, after=5))
    sim.submit(doc("once", 1, restart_policy="Never"))
    sim.run_until_done()
    assert len(starts(sim, "once-0")) == 1
    assert sim.run("once").reason == "Worker once-0 failed on m0: Exited with code 1"


def test_always_restarts_on_completion():
    sim = Simulation(small(1), default=Outcome(exit_code=0, after=5))
    sim.submit(doc("again", 1, restart_policy="Always"))
    sim.advance(60)
    assert len(starts(sim, "again-0")) > 3 and sim.worker("again-0").restarts == 0
    assert sim.run("again").state is not RunState.COMPLETED


def test_restartjob_restarts_every_worker():
    sim = Simulation(default=FOREVER)
    sim.submit(doc("job", 16), scripts={"job-1": [Outcome(1, 30), Outcome(after=None)]})
    sim.advance(30)
    assert sim.run("job").restarts == 1 and all(w.state is WorkerState.PENDING for w in sim.workers("job"))
    sim.advance(10)
    assert len(starts(sim, "job-0")) == 2 and len(starts(sim, "job-1")) == 2


def test_restarttask_restarts_only_the_failed_worker():
    sim = Simulation(small(2), default=FOREVER)
    sim.submit(
        doc("t", 16, resources={"machines": 2}, start="Independent", on_failure="RestartTask"),
        scripts={"t-1": [Outcome(1, 30), Outcome(after=None)]},
    )
    sim.advance(40)
    assert len(starts(sim, "t-0")) == 1 and len(starts(sim, "t-1")) == 2


def test_restarttask_gang_losing_the_leader_restarts_all():
    sim = Simulation(default=FOREVER)
    sim.submit(
        doc("g", 16, on_failure="RestartTask"),
        scripts={"g-0": [Outcome(1, 30), Outcome(after=None)], "g-1": [FOREVER]},
    )
    sim.advance(40)
    assert len(starts(sim, "g-1")) == 2 and sim.run("g").restarts == 1


def test_restarttask_gang_losing_a_follower_restarts_only_it():
    sim = Simulation(default=FOREVER)
    sim.submit(doc("g", 16, on_failure="RestartTask"), scripts={"g-1": [Outcome(1, 30), FOREVER]})
    sim.advance(40)
    assert len(starts(sim, "g-0")) == 1 and len(starts(sim, "g-1")) == 2


def test_failjob_fails_the_run_and_stops_the_others():
    sim = Simulation(default=FOREVER)
    sim.submit(doc("f", 16, on_failure="FailJob"), scripts={"f-1": Outcome(2, 30)})
    sim.advance(30)
    r = sim.run("f")
    assert r.state is RunState.FAILED and r.reason == "Worker f-1 failed on gpu-02: Exited with code 2"
    assert sim.worker("f-0").state is WorkerState.STOPPED and len(starts(sim, "f-1")) == 1


def test_time_limit_stops_and_never_restarts():
    sim = Simulation(default=FOREVER)
    sim.submit(doc("llama-ft", 16, time_limit="12h"))
    sim.advance(12 * 3600)
    w = sim.worker("llama-ft-0")
    assert w.state is WorkerState.FAILED and w.reason == "Stopped at its time limit of 12h"
    assert sim.run("llama-ft").state is RunState.FAILED
    sim.advance(3600)
    assert len(starts(sim, "llama-ft-0")) == 1


def test_lost_machine_marks_workers_down_and_restarts_them():
    sim = Simulation(small(2), default=FOREVER)
    sim.submit(doc("w", 4))
    sim.lose_machine("m0", at=50)
    sim.advance(50)
    w = sim.worker("w-0")
    assert w.state is WorkerState.PENDING and w.restarts == 1 and w.reason.startswith("Machine m0 was lost")
    sim.advance(10)
    assert w.state is WorkerState.RUNNING and w.machine == "m1"


def test_unreachable_machine_makes_workers_stale():
    sim = Simulation(small(1), default=FOREVER)
    sim.submit(doc("w", 4))
    sim.machine_unreachable("m0")
    assert (
        sim.worker("w-0").state is WorkerState.STALE
        and sim.worker("w-0").reason == "Machine m0 stopped reporting"
    )


def test_preempted_worker_keeps_its_restart_budget():
    sim = Simulation(small(1), default=FOREVER)
    sim.submit(doc("low", 8, priority=1), scripts={"low-0": [Outcome(1, 5), FOREVER]})
    sim.advance(20)
    low = sim.worker("low-0")
    assert low.restarts == 1 and low.restart_reason == "Failed"
    env = worker_env(sim.run("low").run, low, None)
    assert (env["ASTRAEUS_ATTEMPT"], env["ASTRAEUS_RESTART_REASON"]) == ("1", "Failed")
    sim.submit(doc("high", 8, priority=10), outcome=Outcome(after=100))
    assert low.state is WorkerState.PENDING and low.restarts == 1 and low.restart_reason == "Preempted"
    (stop,) = [d for _, d in sim.log if isinstance(d, StopWorker) and d.worker == "low-0"]
    assert stop.reason == "Preempted for higher-priority run high; back in the queue"
    assert sim.workers("high")[0].state is WorkerState.RUNNING
    sim.advance(100)
    assert low.state is WorkerState.RUNNING and low.restarts == 1
    env = worker_env(sim.run("low").run, low, None)
    assert (env["ASTRAEUS_ATTEMPT"], env["ASTRAEUS_RESTART_REASON"]) == ("2", "Preempted")


# ---- lifetime --------------------------------------------------------------------------------


def test_service_restarts_whenever_it_ends_and_is_never_completed():
    sim = Simulation(small(1), default=Outcome(exit_code=0, after=60))
    sim.submit(doc("notebook", 1, lifetime="Service", restart_policy="Never"))
    sim.advance(24 * 3600)
    assert len(starts(sim, "notebook-0")) > 100
    assert sim.run("notebook").state is not RunState.COMPLETED
    sim.cancel("notebook")
    assert sim.run("notebook").state is RunState.CANCELLED
    assert sim.worker("notebook-0").state is WorkerState.STOPPED


def test_service_failures_have_no_restart_limit():
    sim = Simulation(small(1), default=Outcome(exit_code=1, after=1))
    sim.submit(doc("svc", 1, lifetime="Service"))
    sim.advance(6 * 3600)
    assert len(starts(sim, "svc-0")) > 20 and sim.run("svc").state is not RunState.FAILED


# ---- arrays ----------------------------------------------------------------------------------


def sweep(size=100, max_parallel=8, **kw):
    return doc(
        "sweep",
        1,
        cpu=8,
        mem="32Gi",
        time_limit="1h",
        array={"size": size, "max_parallel": max_parallel},
        **kw,
    )


def test_array_copies_get_the_whole_ask_and_may_share_a_machine():
    sim = Simulation(default=FOREVER)
    sim.submit(sweep(size=16, max_parallel=0))
    ws = sim.workers("sweep")
    assert [w.name for w in ws[:2]] == ["sweep-0", "sweep-1"]
    assert all(w.gpus == 1 and w.cpu_cores == 8 and w.memory_bytes == 32 * 1024**3 for w in ws)
    assert len({w.machine for w in ws}) == 2


def test_array_waiting_copy_reason():
    sim = Simulation(default=FOREVER)
    sim.submit(sweep())
    assert sim.task_counts("sweep") == {"Pending": 92, "Running": 8}
    assert sim.worker("sweep-8").reason == "Array runs at most 8 workers at once"
    assert sim.run("sweep").reason == "Workers 8 running of 100"


def test_array_max_parallel_caps_machines_held():
    sim = Simulation(default=Outcome(after=60))
    sim.submit(sweep(size=30, max_parallel=4))
    held = []
    sim.observer = lambda s, _: held.append(s.state.holding("sweep"))
    sim.run_until_done()
    assert max(held) == 4 and sim.run("sweep").state is RunState.COMPLETED


def test_array_completed_when_every_copy_completed():
    sim = Simulation(default=Outcome(after=60))
    sim.submit(sweep())
    sim.run_until_done()
    assert sim.run("sweep").state is RunState.COMPLETED and sim.task_counts("sweep") == {"Completed": 100}


def test_array_failed_reason_k_of_n():
    sim = Simulation(default=Outcome(after=60))
    scripts = {f"sweep-{i}": Outcome(exit_code=1, after=30) for i in (17, 40, 41)}
    sim.submit(sweep(restart_policy="Never"), scripts=scripts)
    sim.run_until_done()
    r = sim.run("sweep")
    assert r.state is RunState.FAILED
    assert r.reason.startswith("3 of 100 workers failed; the first: Worker sweep-17 failed on gpu-")
    assert r.reason.endswith(": Exited with code 1")
    assert sim.task_counts("sweep") == {"Completed": 97, "Failed": 3}


def test_array_copy_restarts_on_its_own():
    sim = Simulation(default=Outcome(after=60))
    sim.submit(sweep(size=4, max_parallel=0), scripts={"sweep-2": [Outcome(1, 5), Outcome(0, 60)]})
    sim.run_until_done()
    assert len(starts(sim, "sweep-2")) == 2 and len(starts(sim, "sweep-1")) == 1
    assert sim.run("sweep").state is RunState.COMPLETED


def test_array_environment():
    run = parse_run(sweep())
    sim = Simulation(default=FOREVER)
    sim.submit(run)
    env = worker_env(run, sim.worker("sweep-7"), None)
    assert env["ASTRAEUS_ARRAY_TASK_ID"] == env["ASTRAEUS_REPLICA_INDEX"] == env["RANK"] == "7"
    assert env["ASTRAEUS_ARRAY_SIZE"] == env["WORLD_SIZE"] == env["SLURM_NTASKS"] == "100"
    assert "SLURM_ARRAY_TASK_ID" not in env and "MASTER_ADDR" not in env


# ---- priorities and backfill -------------------------------------------------------------------


def test_priority_higher_runs_first():
    sim = Simulation(small(1), default=Outcome(after=100))
    sim.submit(doc("hold", 8, priority=5))
    sim.submit(doc("low", 8, priority=1))
    sim.submit(doc("high", 8, priority=5))
    sim.advance(100)
    assert sim.workers("high")[0].state is WorkerState.RUNNING and sim.run("low").state is RunState.PENDING


def test_backfill_timed_run_fills_the_gap_before_a_blocked_run():
    sim = Simulation(small(2), default=Outcome(after=None))
    sim.submit(doc("hold", 8, time_limit="2h", priority=5))
    sim.submit(doc("big", 16, priority=5))  # must wait 2 h for "hold"
    sim.submit(doc("short", 8, time_limit="1h"))
    sim.submit(doc("long", 8, time_limit="3h"))
    sim.submit(doc("untimed", 8))
    assert sim.workers("short")[0].state is WorkerState.RUNNING
    assert sim.run("long").state is RunState.PENDING and sim.run("untimed").state is RunState.PENDING
    assert sim.run("untimed").reason == "Waiting behind run big, queued ahead of it"


def test_backfill_needs_every_worker_to_state_a_time_limit():
    sim = Simulation(small(2), default=Outcome(after=None))
    sim.submit(doc("hold", 8, time_limit="2h", priority=5))
    sim.submit(doc("big", 16, priority=5))
    sim.submit(doc("untimed", 8))
    assert sim.run("untimed").state is RunState.PENDING


# ---- names, environment, states ---------------------------------------------------------------


def test_worker_names_and_env_in_multi_worker_and_group_runs():
    run = parse_run(doc("train", 16))
    sim = Simulation(default=FOREVER)
    sim.submit(run)
    w = sim.worker("train-1")
    env = worker_env(run, w, "gpu-01")
    assert env == {
        "MASTER_ADDR": "gpu-01",
        "MASTER_PORT": "29500",
        "RANK": "1",
        "SLURM_NTASKS": "2",
        "SLURM_PROCID": "1",
        "WORLD_SIZE": "2",
        "ASTRAEUS_ATTEMPT": "0",
    }
    groups = parse_run(
        {
            "metadata": {"name": "ps"},
            "spec": {
                "start": "Independent",
                "task_groups": [
                    {"name": "server", "task_template": {"image": "a"}},
                    {
                        "name": "trainer",
                        "replicas": 2,
                        "start_after": "server",
                        "task_template": {"image": "b"},
                    },
                ],
            },
        }
    )
    sim.submit(groups)
    assert [w.name for w in sim.workers("ps")] == ["ps-server-0", "ps-trainer-0", "ps-trainer-1"]
    assert worker_env(groups, sim.worker("ps-trainer-1"), "x")["RANK"] == "2"


def test_start_after_orders_groups():
    sim = Simulation(default=FOREVER)
    sim.submit(
        {
            "metadata": {"name": "ps"},
            "spec": {
                "task_groups": [
                    {"name": "server", "task_template": {"image": "a"}},
                    {"name": "trainer", "start_after": "server", "task_template": {"image": "b"}},
                ],
                "start": "Independent",
            },
        },
        scripts={"ps-server-0": Outcome(after=None, prepare=30)},
    )
    assert sim.worker("ps-trainer-0").reason == "Waiting for group server to run"
    sim.advance(30)
    assert sim.worker("ps-trainer-0").state is WorkerState.RUNNING


def test_every_state_has_a_reason_in_words():
    sim = Simulation(default=Outcome(after=60))
    sim.submit(sweep(size=20), scripts={"sweep-3": Outcome(5, 10)})
    sim.advance(30)
    for w in sim.workers("sweep"):
        assert w.reason
    assert sim.worker("sweep-0").reason == "Container running"
    sim.run_until_done()
    assert sim.worker("sweep-0").reason == "Exited with code 0"


def test_cancel_stops_workers_and_marks_cancelled():
    sim = Simulation(default=FOREVER)
    sim.submit(sweep())
    sim.cancel("sweep")
    assert sim.run("sweep").state is RunState.CANCELLED and sim.run("sweep").reason == "Cancelled by a user"
    assert sim.task_counts("sweep") == {"Stopped": 100}
    assert sum(isinstance(d, StopWorker) for _, d in sim.log) == 8


def test_schedule_is_pure_over_records():
    sim = Simulation(default=FOREVER)
    sim.submit(sweep())
    runs, workers = list(sim.state.runs.values()), list(sim.state.workers.values())
    snapshot = [(w.name, w.state, w.reason, w.machine) for w in workers]
    first = schedule(sim.state.inventory, runs, workers, 10.0)
    assert first == schedule(sim.state.inventory, runs, workers, 10.0)
    assert snapshot == [(w.name, w.state, w.reason, w.machine) for w in workers]
    rebuilt = ClusterState(sim.state.inventory, {r.name: r for r in runs}, {w.name: w for w in workers})
    assert rebuilt.task_counts("sweep") == sim.task_counts("sweep")
    assert places(sim, run="sweep")[0][1].machine == "gpu-01"
