"""``network.interconnect`` and ``topology.keep_within`` hold for every start policy and inventory.

The audit's two cases first (machines with no fabric were paired as if on one; rack r1 = {a1}
was chosen for a run only rack r2 = {a2, a3} can hold), then the rule over random inventories:
every placement keeps a constrained run within one group, and a run that fits somewhere is
placed on the empty cluster, never left waiting (nor one that fits nowhere: it is refused).
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.controlplane import Outcome, Simulation
from reconciler.controlplane.inventory import Inventory, Machine, load_inventory
from reconciler.controlplane.scheduler import HOLDING, RunState, WorkerState

from .helpers import doc

FOREVER = Outcome(after=None)
POLICIES = [("Independent", {}), ("MinAvailable", {"min_available": 1}), ("Gang", {})]
IB = {"network": {"interconnect": "infiniband"}}
RACK = {"topology": {"keep_within": "rack"}}


def machines_of(sim: Simulation, run: str) -> list[str]:
    return sorted(w.machine for w in sim.workers(run) if w.state in HOLDING)


def two_machine_run(name: str, start: str, extra: dict, **constraint) -> dict:
    return doc(name, 16, resources={"machines": 2}, start=start, **extra, **constraint)


# ---- the audit's cases --------------------------------------------------------------------------


@pytest.mark.parametrize(("start", "extra"), POLICIES)
def test_machines_without_a_fabric_are_never_one_infiniband_network(start, extra):
    """Two missing fabrics are not one fabric: nowhere can hold the run, and it is refused in words."""
    inv = load_inventory({"defaults": {"gpus": 8}, "machines": [{"name": f"n{i}"} for i in range(4)]})
    sim = Simulation(inv, default=FOREVER)
    sim.submit(two_machine_run("ib", start, extra, **IB))
    r = sim.run("ib")
    assert r.state is RunState.FAILED and sim.workers("ib") == []
    assert r.reason == (
        "network.interconnect infiniband but no infiniband network can hold 16 GPUs; "
        "this cluster has no infiniband network"
    )


@pytest.mark.parametrize(("start", "extra"), POLICIES)
def test_an_infiniband_run_waits_for_its_fabric_rather_than_machines_without_one(start, extra):
    inv = load_inventory(
        {
            "defaults": {"gpus": 8},
            "machines": [
                {"name": "f1", "fabric": "ib-1"},
                {"name": "f2", "fabric": "ib-1"},
                {"name": "n1"},
                {"name": "n2"},
            ],
        }
    )
    sim = Simulation(inv, default=FOREVER)
    sim.submit(doc("holder", 8), outcome=Outcome(after=100))
    assert machines_of(sim, "holder") == ["f1"]
    sim.submit(two_machine_run("ib", start, extra, **IB))
    assert machines_of(sim, "ib") in ([], ["f2"])  # never n1 or n2
    sim.advance(100)
    assert machines_of(sim, "ib") == ["f1", "f2"]
    assert all(w.state is WorkerState.RUNNING for w in sim.workers("ib"))


@pytest.mark.parametrize(("start", "extra"), POLICIES)
def test_keep_within_rack_chooses_the_rack_that_holds_the_whole_run(start, extra):
    """r1 = {a1} cannot hold two workers, r2 = {a2, a3} can: r2 is chosen before a1 is touched."""
    inv = load_inventory(
        {
            "defaults": {"gpus": 8},
            "machines": [
                {"name": "a1", "rack": "r1"},
                {"name": "a2", "rack": "r2"},
                {"name": "a3", "rack": "r2"},
            ],
        }
    )
    sim = Simulation(inv, default=FOREVER)
    sim.submit(two_machine_run("k", start, extra, **RACK))
    assert machines_of(sim, "k") == ["a2", "a3"]
    assert sim.run("k").state is RunState.RUNNING


def test_minavailable_places_the_rest_in_the_first_workers_rack():
    """The workers that join later go where the first ones are, not to the fullest machine anywhere."""
    inv = load_inventory(
        {
            "defaults": {"gpus": 8},
            "machines": [{"name": f"{rack}{i}", "rack": rack} for rack in ("a", "b") for i in range(3)],
        }
    )
    sim = Simulation(inv, default=FOREVER)
    sim.submit(doc("busy", 8), outcome=Outcome(after=50))  # a0 taken for 50 s
    sim.submit(doc("m", 24, resources={"machines": 3}, start="MinAvailable", min_available=2, **RACK))
    racks = {sim.state.machines[m].rack for m in machines_of(sim, "m")}
    assert racks == {"b"} and len(machines_of(sim, "m")) == 3  # the rack where all three fit now


def test_a_restarted_worker_goes_back_into_its_runs_group():
    inv = load_inventory(
        {
            "defaults": {"gpus": 8},
            "machines": [{"name": f"{rack}{i}", "rack": rack} for rack in ("a", "b") for i in range(2)],
        }
    )
    sim = Simulation(inv, default=FOREVER)
    sim.submit(
        two_machine_run("k", "Independent", {}, **RACK),
        scripts={"k-1": [Outcome(exit_code=1, after=5), FOREVER]},
    )
    assert machines_of(sim, "k") == ["a0", "a1"]
    sim.advance(5)  # k-1 failed on a1; back in 10 s
    sim.submit(doc("taker", 8, priority=0), outcome=Outcome(after=100))  # takes a1 meanwhile
    assert sim.worker("taker-0").machine == "a1"
    sim.advance(60)
    assert sim.worker("k-1").state is WorkerState.PENDING  # b0 and b1 are free, but not in rack a
    sim.advance(60)
    assert machines_of(sim, "k") == ["a0", "a1"]


def test_one_machine_holds_any_constraint_even_without_a_rack():
    """Nothing leaves one machine: a run that fits one is placed there, rack or no rack."""
    inv = load_inventory({"defaults": {"gpus": 8}, "machines": [{"name": "n0"}, {"name": "n1"}]})
    sim = Simulation(inv, default=FOREVER)
    sim.submit(doc("one", 8, **RACK, **IB))
    sim.submit(doc("copies", 2, array={"size": 4}, **RACK))
    assert machines_of(sim, "one") == ["n0"]
    assert sim.run("copies").state is RunState.RUNNING and len(set(machines_of(sim, "copies"))) == 1


# ---- the rule, over random inventories ---------------------------------------------------------

INTERCONNECT_ATTRS = {
    "nvlink": ("nvlink_domain",),
    "infiniband": ("nvlink_domain", "fabric"),
    "rdma": ("nvlink_domain", "fabric", "rdma_network"),
}
KEEP_ATTRS = {"rack": "rack", "fabric": "fabric", "nvlink_domain": "nvlink_domain"}


def keeps_the_rule(machines: list[Machine], interconnect: str | None, keep: str | None) -> bool:
    """The rule, written out: one machine, or every machine sharing a known key where asked."""
    if len({m.name for m in machines}) <= 1:
        return True

    def shared(attr: str) -> bool:
        keys = {getattr(m, attr) for m in machines}
        return len(keys) == 1 and None not in keys

    if keep is not None and not shared(KEEP_ATTRS[keep]):
        return False
    if interconnect in INTERCONNECT_ATTRS:
        return any(shared(attr) for attr in INTERCONNECT_ATTRS[interconnect])
    return True


maybe = st.one_of(st.none(), st.sampled_from(["x", "y"]))


@st.composite
def inventories(draw) -> Inventory:
    n = draw(st.integers(1, 6))
    out = []
    for i in range(n):
        out.append(
            Machine(
                name=f"m{i}",
                gpus=draw(st.sampled_from([4, 8])),
                cpu_cores=64,
                nvlink_domain=draw(maybe),
                fabric=draw(maybe),
                rdma_network=draw(maybe),
                rack=draw(maybe),
            )
        )
    return Inventory(tuple(out))


@st.composite
def constrained_runs(draw, name: str, kinds=("machines", "shape", "array", "groups")) -> tuple[dict, tuple]:
    interconnect = draw(st.sampled_from([None, "nvlink", "infiniband", "rdma", "ethernet"]))
    keep = draw(st.sampled_from([None, "rack", "fabric", "nvlink_domain"]))
    if interconnect is None and keep is None:
        keep = "rack"
    spec: dict = {}
    if interconnect is not None:
        spec["network"] = {"interconnect": interconnect}
    if keep is not None:
        spec["topology"] = {"keep_within": keep}
    kind = draw(st.sampled_from(kinds))
    gpus = draw(st.sampled_from([2, 4, 8]))
    if kind == "machines":
        n = draw(st.integers(1, 4))
        start = draw(st.sampled_from(["Independent", "MinAvailable", "Gang"]))
        if start == "MinAvailable":
            spec["min_available"] = draw(st.integers(1, n))
        d = doc(name, gpus * n, resources={"machines": n}, start=start, **spec)
        shape = ("machines", n, gpus)
    elif kind == "shape":
        count = draw(st.sampled_from([4, 8, 12, 16, 24]))
        d = doc(name, count, **spec)
        shape = ("shape", count)
    elif kind == "array":
        d = doc(name, gpus, array={"size": draw(st.integers(1, 6))}, **spec)
        shape = ("array",)
    else:
        d = doc(name, None, **spec)
        d["spec"].pop("task_template")
        d["spec"]["task_groups"] = [
            {
                "name": "a",
                "replicas": 2,
                "task_template": {"image": "a", "requested_resources": {"gpu_requests": {"count": gpus}}},
            },
            {
                "name": "b",
                "task_template": {"image": "b", "requested_resources": {"gpu_requests": {"count": 2}}},
            },
        ]
        shape = ("groups",)
    return d, (interconnect, keep, shape)


def check_groups(sim: Simulation, _decisions) -> None:
    for r in sim.state.runs.values():
        spec = r.run.spec
        interconnect = spec.network.interconnect if spec.network else None
        keep = spec.topology.keep_within if spec.topology else None
        held = [sim.state.machines[w.machine] for w in sim.workers(r.name) if w.state in HOLDING]
        assert keeps_the_rule(held, interconnect, keep), (r.name, interconnect, keep, [m.name for m in held])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inventories(), st.data())
def test_every_placement_keeps_a_constrained_run_within_one_group(inventory, data):
    sim = Simulation(inventory, observer=check_groups)
    for i in range(data.draw(st.integers(1, 5))):
        d, _ = data.draw(constrained_runs(f"r{i}"))
        outcome = Outcome(
            exit_code=data.draw(st.sampled_from([0, 1])), after=data.draw(st.sampled_from([5.0, 60.0]))
        )
        sim.submit(d, outcome=outcome)
        sim.advance(data.draw(st.sampled_from([0.0, 10.0])))
    if data.draw(st.booleans()):
        sim.lose_machine(inventory.machines[0].name, at=sim.now + 7)
    sim.advance(3600)


def fits_somewhere(inventory: Inventory, interconnect, keep, shape) -> bool:
    """Whether some set of machines keeping the rule could hold the run (brute force)."""
    ms = list(inventory)
    if shape[0] == "machines":
        _, n, gpus = shape
        able = [m for m in ms if m.gpus >= gpus]
        return any(keeps_the_rule(list(c), interconnect, keep) for c in itertools.combinations(able, n))
    count = shape[1]
    for k in range(1, len(ms) + 1):
        for c in itertools.combinations(ms, k):
            if sum(m.gpus for m in c) >= count and keeps_the_rule(list(c), interconnect, keep):
                return True
    return False


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inventories(), st.data())
def test_a_run_that_fits_somewhere_is_placed_on_the_empty_cluster_and_one_that_does_not_is_refused(
    inventory, data
):
    d, (interconnect, keep, shape) = data.draw(constrained_runs("r", kinds=("machines", "shape")))
    sim = Simulation(inventory, default=FOREVER, observer=check_groups)
    sim.submit(d)
    sim.advance(60)
    r = sim.run("r")
    if fits_somewhere(inventory, interconnect, keep, shape):
        assert r.state is RunState.RUNNING, r.reason
        assert all(w.state is WorkerState.RUNNING for w in sim.workers("r"))
    else:
        assert r.state is RunState.FAILED and sim.workers("r") == [], r.reason


def test_a_gang_of_task_groups_that_fits_one_machine_without_a_rack_is_placed_there():
    inv = load_inventory({"defaults": {"gpus": 8}, "machines": [{"name": "n0"}, {"name": "n1"}]})
    sim = Simulation(inv, default=FOREVER)
    d = doc("tg", None, start="Gang", **RACK)
    d["spec"].pop("task_template")
    d["spec"]["task_groups"] = [
        {"name": g, "task_template": {"image": g, "requested_resources": {"gpu_requests": {"count": 4}}}}
        for g in ("a", "b")
    ]
    sim.submit(d)
    assert sim.run("tg").state is RunState.RUNNING and machines_of(sim, "tg") == ["n0", "n0"]
