"""Workspaces' GPU quotas in the simulation: teams sharing one cluster (issue 17).

Runs of a workspace are keyed ``default/WORKSPACE/default/NAME`` (``Simulation.key``); every
reason a workspace sees names its own runs by their names."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.controlplane import Outcome, Simulation
from reconciler.controlplane.inventory import load_inventory
from reconciler.controlplane.scheduler import HOLDING, PlaceWorker, RunState, StopWorker, WorkerState

from .helpers import doc

FOREVER = Outcome(after=None)
key = Simulation.key


def cluster(n=2, gpus=8):
    return load_inventory(
        {"defaults": {"gpus": gpus, "rack": "r"}, "machines": [{"name": f"m{i}"} for i in range(n)]}
    )


def held(sim: Simulation, workspace: str) -> int:
    """GPUs the workspace's workers hold, counted from the workers themselves."""
    return sum(
        w.gpus
        for w in sim.state.workers.values()
        if w.state in HOLDING and w.run.startswith(f"default/{workspace}/")
    )


def states(sim: Simulation, run: str) -> dict[str, int]:
    return sim.task_counts(run)


def test_two_workspaces_competing_each_get_their_quota():
    sim = Simulation(cluster(), default=FOREVER)
    sim.set_quota("team-a", gpus=8)
    sim.set_quota("team-b", gpus=8)
    sim.submit(doc("sweep", 1, array={"size": 16}), workspace="team-a")
    sim.submit(doc("sweep", 1, array={"size": 16}), workspace="team-b")
    assert held(sim, "team-a") == held(sim, "team-b") == 8
    for team in ("team-a", "team-b"):
        a = key("sweep", team)
        assert states(sim, a) == {"Pending": 8, "Running": 8}
        waiting = [w for w in sim.workers(a) if w.state is WorkerState.PENDING]
        assert waiting[0].reason == f"Workspace {team} is at its quota of 8 GPUs"


def test_without_quotas_the_first_workspace_takes_the_cluster():
    sim = Simulation(cluster(), default=FOREVER)
    sim.submit(doc("sweep", 1, array={"size": 16}), workspace="team-a")
    sim.submit(doc("sweep", 1, array={"size": 16}), workspace="team-b")
    assert (held(sim, "team-a"), held(sim, "team-b")) == (16, 0)


def test_a_run_held_by_its_quota_holds_back_no_other_workspace():
    sim = Simulation(cluster(), default=FOREVER)
    sim.set_quota("team-a", gpus=8)
    big = sim.submit(doc("big", 16, start="Gang"), workspace="team-a")
    assert (big.state, big.reason) == (RunState.PENDING, "Workspace team-a is at its quota of 8 GPUs")
    later = sim.submit(doc("later", 8), workspace="team-b")
    assert later.state is RunState.RUNNING
    own = sim.submit(doc("own", 8), workspace="team-a")
    assert own.state is RunState.RUNNING and held(sim, "team-a") == 8


def test_the_default_workspace_has_its_own_quota_and_names():
    sim = Simulation(cluster(), default=FOREVER)
    sim.set_quota("default", gpus=4)
    sim.submit(doc("a", 4))
    b = sim.submit(doc("b", 4))
    assert b.name == "b" and b.reason == "Workspace default is at its quota of 4 GPUs"


def test_preemption_never_takes_gpus_from_another_workspace_past_a_quota():
    sim = Simulation(cluster(), default=FOREVER)
    sim.set_quota("team-a", gpus=8)
    for i in range(2):
        sim.submit(doc(f"low{i}", 8, priority=1), workspace="team-b")
    assert held(sim, "team-b") == 16
    first = sim.submit(doc("high", 8, priority=10), workspace="team-a")
    assert first.state is RunState.RUNNING  # within its quota: a lower priority made room
    assert held(sim, "team-b") == 8
    (stop,) = [d for _, d in sim.log if isinstance(d, StopWorker)]
    assert stop.reason == "Preempted for a higher-priority run of workspace team-a; back in the queue"
    second = sim.submit(doc("higher", 8, priority=10), workspace="team-a")
    assert second.reason == "Workspace team-a is at its quota of 8 GPUs"
    assert held(sim, "team-b") == 8  # nothing more taken from team-b
    assert len([d for _, d in sim.log if isinstance(d, StopWorker)]) == 1


def test_preemption_within_a_workspace_names_the_run():
    sim = Simulation(cluster(1), default=FOREVER)
    sim.submit(doc("low", 8, priority=1), workspace="team-a")
    sim.submit(doc("high", 8, priority=10), workspace="team-a")
    (stop,) = [d for _, d in sim.log if isinstance(d, StopWorker)]
    assert stop.reason == "Preempted for higher-priority run high; back in the queue"


def test_a_waiting_copy_says_which_of_max_parallel_or_the_quota_holds_it():
    sim = Simulation(cluster(), default=FOREVER)
    sim.set_quota("team-a", gpus=8)
    sim.submit(doc("capped", 1, array={"size": 10, "max_parallel": 4}), workspace="team-a")
    capped = [w for w in sim.workers(key("capped", "team-a")) if w.state is WorkerState.PENDING]
    assert capped[0].reason == "Array runs at most 4 workers at once"
    sim.submit(doc("quota", 1, array={"size": 10, "max_parallel": 6}), workspace="team-a")
    quota = [w for w in sim.workers(key("quota", "team-a")) if w.state is WorkerState.PENDING]
    assert states(sim, key("quota", "team-a")) == {"Pending": 6, "Running": 4}
    assert quota[0].reason == "Workspace team-a is at its quota of 8 GPUs"
    # the readout of a run with copies running, and the rest by rank: only the next one is told
    assert all(w.reason == "Waiting in the queue" for w in quota[1:])


def test_a_quota_raised_while_copies_wait_lets_them_start():
    sim = Simulation(cluster(), default=FOREVER)
    sim.set_quota("team-a", gpus=2)
    sweep = key("sweep", "team-a")
    sim.submit(doc("sweep", 1, array={"size": 10}), workspace="team-a")
    assert states(sim, sweep) == {"Pending": 8, "Running": 2}
    sim.advance(30)
    sim.set_quota("team-a", gpus=6)
    assert states(sim, sweep) == {"Pending": 4, "Running": 6}
    waiting = [w for w in sim.workers(sweep) if w.state is WorkerState.PENDING]
    assert waiting[0].reason == "Workspace team-a is at its quota of 6 GPUs"
    sim.set_quota("team-a")  # lifted
    assert states(sim, sweep) == {"Running": 10}


def test_a_quota_lowered_below_what_is_held_stops_nothing_and_starts_nothing():
    sim = Simulation(cluster(), default=FOREVER)
    sim.submit(doc("a", 8), workspace="team-a")
    sim.set_quota("team-a", gpus=4)
    assert sim.run(key("a", "team-a")).state is RunState.RUNNING
    b = sim.submit(doc("b", 1), workspace="team-a")
    assert b.reason == "Workspace team-a is at its quota of 4 GPUs"


def test_copies_finishing_free_quota_for_the_next_ones():
    sim = Simulation(cluster(), default=Outcome(after=60))
    sim.set_quota("team-a", gpus=4)
    sweep = key("sweep", "team-a")
    sim.submit(doc("sweep", 1, array={"size": 12}), workspace="team-a")
    peak = 0

    def watch():
        nonlocal peak
        peak = max(peak, held(sim, "team-a"))

    for _ in range(5):
        sim.advance(60)
        watch()
    assert sim.run(sweep).state is RunState.COMPLETED and peak == 4


def test_a_quota_of_running_runs():
    sim = Simulation(cluster(), default=FOREVER)
    sim.set_quota("team-a", runs=1)
    sim.submit(doc("one", 1), workspace="team-a")
    two = sim.submit(doc("two", 1), workspace="team-a")
    assert two.reason == "Workspace team-a is at its quota of 1 running runs"
    cpu = sim.submit(doc("cpu", None, cpu=1), workspace="team-a")  # no GPU: still a running run
    assert cpu.state is RunState.PENDING
    sim.cancel(key("one", "team-a"))
    assert sim.run(key("two", "team-a")).state is RunState.RUNNING


def test_a_gang_waits_whole_on_its_quota():
    sim = Simulation(cluster(), default=FOREVER)
    sim.set_quota("team-a", gpus=12)
    sim.submit(doc("small", 8), workspace="team-a")
    gang = sim.submit(doc("gang", 8, start="Gang", resources={"machines": 2}), workspace="team-a")
    assert gang.reason == "Workspace team-a is at its quota of 12 GPUs"
    assert all(w.state is WorkerState.PENDING for w in sim.workers(gang.name))
    sim.cancel(key("small", "team-a"))
    assert gang.state is RunState.RUNNING


def test_a_reason_names_another_workspace_s_run_only_by_its_workspace():
    sim = Simulation(cluster(1), default=FOREVER)
    sim.submit(doc("hog", 8), workspace="team-b")
    sim.submit(doc("wait", 8), workspace="team-a")
    sim.submit(doc("behind", 8, time_limit=None), workspace="team-a")
    behind = sim.run(key("behind", "team-a"))
    assert behind.reason == "Waiting behind run wait, queued ahead of it"
    sim.submit(doc("other", 8), workspace="team-b")
    other = sim.run(key("other", "team-b"))
    assert other.reason == "Waiting behind a run of workspace team-a, queued ahead of it"


# ---- invariants ------------------------------------------------------------------------------

TEAMS = ("team-a", "team-b", "team-c")


def quota_kept(sim: Simulation, decisions) -> None:
    """What each workspace holds is what its counters say, and a tick never takes it past its
    quota (a quota lowered below what it holds stops nothing: it only grows no more)."""
    s = sim.state
    placed = {sim.worker(d.worker).run for d in decisions if isinstance(d, PlaceWorker)}
    for team in TEAMS:
        ws = f"default/{team}"
        gpus = held(sim, team)
        runs = {w.run for w in s.workers.values() if w.state in HOLDING and w.run.startswith(ws + "/")}
        assert s.ws_gpus[ws] == gpus and s.ws_runs[ws] == len(runs)
        quota = s.quotas.get(ws)
        if quota is None or not any(r.startswith(ws + "/") for r in placed):
            continue
        if quota.gpus is not None:
            assert gpus <= quota.gpus, (team, gpus, quota)
        if quota.runs is not None:
            assert len(runs) <= quota.runs, (team, runs, quota)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_no_workspace_ever_holds_more_than_its_quota(data):
    sim = Simulation(cluster(3), observer=quota_kept)
    for team in TEAMS:
        if data.draw(st.booleans()):
            sim.set_quota(
                team, gpus=data.draw(st.integers(0, 16)), runs=data.draw(st.none() | st.integers(1, 4))
            )
    for i in range(data.draw(st.integers(1, 8))):
        team = data.draw(st.sampled_from(TEAMS))
        kind = data.draw(st.sampled_from(["single", "gang", "array"]))
        gpus = data.draw(st.integers(1, 8))
        extra = {"priority": data.draw(st.integers(0, 3))}
        if kind == "gang":
            d = doc(f"r{i}", gpus * 2, start="Gang", resources={"machines": 2}, **extra)
        elif kind == "array":
            d = doc(f"r{i}", gpus, array={"size": data.draw(st.integers(1, 6))}, **extra)
        else:
            d = doc(f"r{i}", gpus, **extra)
        outcome = Outcome(after=data.draw(st.sampled_from([5.0, 60.0, 700.0])))
        sim.submit(d, outcome=outcome, workspace=team)
        sim.advance(data.draw(st.sampled_from([0.0, 10.0, 100.0])))
        if data.draw(st.booleans()):
            sim.set_quota(team, gpus=data.draw(st.integers(0, 24)))
    sim.advance(3600)
