"""Invariants over random inventories and runs, checked after every tick of a simulation."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.controlplane import Outcome, Simulation
from reconciler.controlplane.inventory import Inventory, Machine
from reconciler.controlplane.scheduler import HOLDING, RunState, WorkerState

from .helpers import doc

machines = st.lists(
    st.tuples(st.integers(1, 8), st.integers(0, 8), st.integers(0, 3), st.integers(0, 2)),
    min_size=1,
    max_size=6,
)


@st.composite
def inventories(draw):
    out = []
    for i, (gpus, healthy, rack, dom) in enumerate(draw(machines)):
        out.append(
            Machine(
                name=f"m{i}",
                gpus=gpus,
                healthy_gpus=min(healthy, gpus),
                cpu_cores=64,
                memory_bytes=512 * 1024**3,
                rack=f"r{rack}",
                fabric=f"ib{rack}",
                nvlink_domain=f"nvl{rack}-{dom}",
                rdma_network="roce",
            )
        )
    return Inventory(tuple(out))


@st.composite
def runs(draw, i):
    kind = draw(st.sampled_from(["single", "gang", "array", "machines", "minavail"]))
    gpus = draw(st.integers(1, 8))
    common = {
        "restart_policy": draw(st.sampled_from(["OnFailure", "Never", "Always"])),
        "time_limit": draw(st.sampled_from([None, 50, 400])),
        "cpu": draw(st.sampled_from([None, 4, 16])),
    }
    extra = {"priority": draw(st.integers(0, 3))}
    if draw(st.booleans()):
        extra["on_failure"] = draw(st.sampled_from(["RestartJob", "RestartTask", "FailJob"]))
    name = f"r{i}"
    if kind == "single":
        d = doc(name, gpus, **common, **extra)
    elif kind == "gang":
        d = doc(name, gpus * 2, start="Gang", **common, **extra)
    elif kind == "machines":
        d = doc(name, gpus * 2, resources={"machines": 2}, **common, **extra)
    elif kind == "minavail":
        d = doc(
            name,
            gpus * 3,
            resources={"machines": 3},
            start="MinAvailable",
            min_available=2,
            **common,
            **extra,
        )
    else:
        size = draw(st.integers(1, 12))
        extra.pop("on_failure", None)
        d = doc(
            name, gpus, array={"size": size, "max_parallel": draw(st.integers(0, size))}, **common, **extra
        )
    outcome = Outcome(
        exit_code=draw(st.sampled_from([0, 0, 1])),
        after=draw(st.sampled_from([5.0, 60.0, 700.0])),
        prepare=draw(st.sampled_from([0.0, 0.0, 30.0])),
        pull=draw(st.sampled_from([0.0, 0.0, 20.0])),
    )
    return d, outcome


def check(sim: Simulation, _decisions) -> None:
    s = sim.state
    used: dict[str, list[int]] = {m.name: [0, 0, 0] for m in s.inventory}
    by_run: dict[str, list] = {}
    for w in s.workers.values():
        assert w.reason, w
        if w.state in HOLDING:
            u = used[w.machine]
            u[0] += w.gpus
            u[1] += w.cpu_cores
            u[2] += w.memory_bytes
            m = s.machines[w.machine]
            assert w.gpus - w.unhealthy_gpus <= m.healthy
        by_run.setdefault(w.run, []).append(w)
        r = s.runs[w.run]
        if not r.service:
            assert w.restarts <= 10
    for name, (g, c, mem) in used.items():
        m = s.machines[name]
        assert g <= m.gpus and c <= m.cpu_cores and mem <= m.memory_bytes, name
    for rname, ws in by_run.items():
        r = s.runs[rname]
        assert r.reason
        spec = r.run.spec
        if spec.array and spec.array.max_parallel:
            assert sum(w.state in HOLDING for w in ws) <= spec.array.max_parallel
        if r.start == "Gang" and r.on_failure == "RestartJob":
            running = any(w.state is WorkerState.RUNNING for w in ws)
            waiting = any(
                w.state
                in (WorkerState.PENDING, WorkerState.PREPARING, WorkerState.PULLING, WorkerState.READY)
                for w in ws
            )
            assert not (running and waiting), [(w.name, w.state) for w in ws]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inventories(), st.data())
def test_random_runs_keep_every_invariant(inventory, data):
    sim = Simulation(inventory, observer=check)
    if data.draw(st.booleans()):  # a machine goes silent; it may come back before it counts as lost
        silent = inventory.machines[0].name
        sim.machine_unreachable(silent, at=data.draw(st.sampled_from([5.0, 50.0])))
        sim.machine_back(silent, at=data.draw(st.sampled_from([100.0, 1000.0])))
    n = data.draw(st.integers(1, 5))
    for i in range(n):
        d, outcome = data.draw(runs(i))
        sim.submit(d, outcome=outcome)
        sim.advance(data.draw(st.sampled_from([0.0, 10.0, 100.0])))
    sim.advance(6 * 3600)
    for r in sim.state.runs.values():
        assert r.reason
        if r.state is RunState.COMPLETED:
            assert all(w.state is WorkerState.COMPLETED for w in sim.workers(r.name))


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 10_000).map(lambda n: n % 40 + 1), st.integers(0, 40))
def test_array_cap_never_exceeded(size, cap):
    cap = min(cap, size)
    sim = Simulation(observer=check, default=Outcome(after=30))
    sim.submit(doc("a", 1, array={"size": size, "max_parallel": cap}))
    sim.run_until_done()
    assert sim.run("a").state is RunState.COMPLETED
