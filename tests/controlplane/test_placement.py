"""The shape: GPUs, not machines (seed 000)."""

from reconciler.controlplane import Outcome, Simulation
from reconciler.controlplane.inventory import GIB, Machine, default_inventory, load_inventory
from reconciler.controlplane.scheduler import RunState, WorkerState

from .helpers import doc

FOREVER = Outcome(after=None)


def machines_of(sim, run):
    return [sim.state.machines[w.machine] for w in sim.workers(run)]


def test_shape_one_machine_first():
    sim = Simulation(default=FOREVER)
    sim.submit(doc("one", 8))
    assert [(w.machine, w.gpus) for w in sim.workers("one")] == [("gpu-01", 8)]
    assert sim.run("one").start == "Independent"  # fits one machine: the seeds' default


def test_shape_llama_ft_takes_one_nvlink_domain():
    sim = Simulation(default=FOREVER)
    sim.submit(doc("llama-ft", 16, per_gpu={"cpu_cores": 12, "memory_bytes": "120Gi"}, time_limit="12h"))
    ms = machines_of(sim, "llama-ft")
    assert len(ms) == 2 and len({m.nvlink_domain for m in ms}) == 1
    assert [(w.gpus, w.cpu_cores, w.memory_bytes) for w in sim.workers("llama-ft")] == [
        (8, 96, 960 * GIB)
    ] * 2
    assert sim.run("llama-ft").start == "Gang" and sim.run("llama-ft").on_failure == "RestartJob"


def test_shape_then_one_infiniband_fabric():
    sim = Simulation(default=FOREVER)
    sim.submit(doc("big", 32))
    ms = machines_of(sim, "big")
    assert len(ms) == 4 and len({m.fabric for m in ms}) == 1 and len({m.rack for m in ms}) == 1


def test_shape_then_one_rdma_network_then_ethernet():
    sim = Simulation(default=FOREVER)
    sim.submit(doc("wide", 48))
    ms = machines_of(sim, "wide")
    assert len(ms) == 6 and len({m.rdma_network for m in ms}) == 1
    sim.submit(doc("widest", 72))  # 80 GPUs are left across both RDMA networks: only Ethernet has room
    ms = machines_of(sim, "widest")
    assert len(ms) == 9 and len({m.rdma_network for m in ms}) == 2


def test_shape_fewest_machines_when_machines_are_partly_used():
    sim = Simulation(default=FOREVER)
    for i in range(4):
        sim.submit(doc(f"small-{i}", 4))  # four machines half used
    sim.submit(doc("ten", 10))
    ws = sim.workers("ten")
    assert len(ws) == 2 and sum(w.gpus for w in ws) == 10


def test_machines_n_splits_gpus_evenly():
    sim = Simulation(default=FOREVER)
    sim.submit(doc("four", 16, resources={"machines": 4}))
    ws = sim.workers("four")
    assert [w.gpus for w in ws] == [4, 4, 4, 4] and len({w.machine for w in ws}) == 4


def test_min_per_machine_is_never_undercut():
    sim = Simulation(default=FOREVER)
    sim.submit(doc("filler", 64, resources={"machines": 16}))  # every machine has 4 free GPUs
    sim.submit(doc("k", 8, gpu={"min_per_machine": 8}))
    assert sim.run("k").state is RunState.PENDING
    sim.submit(doc("loose", 8, time_limit="1h"))  # backfills: "k" cannot start before it ends
    assert [w.gpus for w in sim.workers("loose")] == [4, 4]


def test_gpu_model_and_memory_are_honoured():
    inv = load_inventory(
        {
            "machines": [
                {"name": "a100", "gpu_model": "A100", "gpu_memory_gb": 40},
                {"name": "h100", "gpu_model": "H100", "gpu_memory_gb": 80},
            ]
        }
    )
    sim = Simulation(inv, default=FOREVER)
    sim.submit(doc("m", 1, gpu={"models": ["A100"]}))
    sim.submit(doc("mem", 1, gpu={"min_memory_gb": 60}))
    assert sim.workers("m")[0].machine == "a100" and sim.workers("mem")[0].machine == "h100"


def test_healthy_only_uses_only_healthy_gpus():
    inv = load_inventory({"machines": [{"name": "sick", "gpus": 8, "healthy_gpus": 2}]})
    sim = Simulation(inv, default=FOREVER)
    sim.submit(doc("healthy", 2, gpu={"healthy_only": True}))
    sim.submit(doc("any", 6))
    sim.submit(doc("more", 1, gpu={"healthy_only": True}))
    assert sim.workers("healthy")[0].state is WorkerState.RUNNING
    assert sim.run("more").state is RunState.PENDING
    assert sim.workers("any")[0].unhealthy_gpus == 6


def test_interconnect_infiniband_is_never_slower():
    sim = Simulation(default=FOREVER)
    sim.submit(doc("ib", 24, network={"interconnect": "infiniband"}))
    assert len({m.fabric for m in machines_of(sim, "ib")}) == 1
    sim.submit(doc("too-wide", 48, network={"interconnect": "infiniband"}))
    r = sim.run("too-wide")
    assert r.state is RunState.FAILED
    assert r.reason == (
        "network.interconnect infiniband but no infiniband network can hold 48 GPUs; "
        "the largest infiniband network has 32"
    )


def test_keep_within_nvlink_domain():
    sim = Simulation(default=FOREVER)
    sim.submit(doc("held", 8))  # gpu-01 full: its NVLink domain has 8 free GPUs left
    sim.submit(doc("nvl", 12, topology={"keep_within": "nvlink_domain"}))
    ms = machines_of(sim, "nvl")
    assert len({m.nvlink_domain for m in ms}) == 1 and "gpu-01" not in {m.name for m in ms}


def test_unsatisfiable_min_per_machine_fails_at_once():
    inv = load_inventory({"defaults": {"gpus": 4}, "machines": [{"name": f"n{i}"} for i in range(4)]})
    sim = Simulation(inv)
    sim.submit(doc("k8", 8, gpu={"min_per_machine": 8, "models": ["H100"]}))
    r = sim.run("k8")
    assert r.state is RunState.FAILED
    assert r.reason == "min_per_machine 8 but the largest machine with H100 has 4 GPUs"


def test_unsatisfiable_model_memory_and_size_fail_at_once():
    sim = Simulation()
    sim.submit(doc("b200", 1, gpu={"models": ["B200"]}))
    sim.submit(doc("huge-mem", 1, gpu={"min_memory_gb": 192}))
    sim.submit(doc("too-many", 512))
    sim.submit(doc("copy", 16, array={"size": 2}))
    assert (
        sim.run("b200").reason
        == "gpu_requests.models B200 but no machine has those GPUs (the cluster has H100)"
    )
    assert sim.run("huge-mem").reason == "gpu_requests.min_memory_gb 192 but the largest GPU memory is 80 GB"
    assert sim.run("too-many").reason == (  # the GPUs themselves: not "with its cores and memory"
        "gpu_requests.count 512 but all 16 machines together have 128 GPUs; the largest has 8"
    )
    assert sim.run("copy").reason == (
        "gpu_requests.count 16 but an array copy runs on one machine and the largest machine has 8 GPUs"
    )
    assert all(sim.run(n).state is RunState.FAILED for n in ("b200", "huge-mem", "too-many", "copy"))


def test_a_gang_whose_cores_per_gpu_leave_too_few_gpus_says_so():
    sim = Simulation()
    sim.submit(doc("cores", 40, per_gpu={"cpu_cores": 64}))  # 2 GPUs of each machine's 8: 32 in all
    assert sim.run("cores").reason == (
        "gpu_requests.count 40 but the machines can hold at most 32 GPUs of this run with its cores "
        "and memory per GPU"
    )


def test_run_that_fits_an_empty_cluster_waits_instead_of_failing():
    sim = Simulation(default=FOREVER)
    sim.submit(doc("all", 128))
    sim.submit(doc("next", 8))
    assert sim.run("next").state is RunState.PENDING and sim.run("next").reason.startswith("Waiting")


def test_machine_dataclass_defaults_are_healthy():
    assert Machine("x").healthy == 8 and default_inventory()["gpu-16"].rack == "rack-4"


# ---- cost: a queue of blocked runs does not search the cluster once per run ----------------------


def _count_shapes(monkeypatch) -> list[int]:
    from reconciler.controlplane import scheduler

    calls = [0]
    real = scheduler._shape

    def counting(*args, **kw):
        calls[0] += 1
        return real(*args, **kw)

    monkeypatch.setattr(scheduler, "_shape", counting)
    return calls


def _queue(sim, count: int, gpus: int = 16, **spec) -> None:
    from reconciler.runspec.parse import parse_run

    for i in range(count):
        sim.state.submit(parse_run(doc(f"q{i}", gpus, time_limit=3600, **spec)), sim.now)


def _blocked_queue_searches(monkeypatch, queued: int, fill, **spec) -> tuple[int, str]:
    """Searches for room (``_shape`` calls) while ``queued`` alike runs wait behind ``fill``."""
    sim = Simulation(fill[0], default=FOREVER)
    for d in fill[1:]:
        sim.submit(d)
    calls = _count_shapes(monkeypatch)
    _queue(sim, queued, **spec)
    sim.advance(0)
    waiting = [sim.run(f"q{i}") for i in range(queued)]
    assert all(r.state is RunState.PENDING and r.admitted for r in waiting)
    return calls[0], waiting[-1].reason


def test_identical_blocked_asks_search_for_room_once_a_tick(monkeypatch):
    """18 GPUs free but no NVLink domain with 16: the first of the alike runs searches, the rest not."""
    # 6 GPUs taken on gpu-01..05: the NVLink domains have 4, 4 and 10 GPUs free
    fill = [default_inventory(racks=1, machines_per_rack=6)] + [
        doc(f"f{i}", 6, time_limit=3600) for i in range(5)
    ]
    keep = {"topology": {"keep_within": "nvlink_domain"}}
    few, reason = _blocked_queue_searches(monkeypatch, 10, fill, **keep)
    many, _ = _blocked_queue_searches(monkeypatch, 40, fill, **keep)
    assert reason == "Waiting for room: 16 GPUs on one network"
    assert few == many < 20  # the same few searches a tick (the backfill estimate), however many wait


def test_a_run_needing_more_gpus_than_are_free_does_not_search(monkeypatch):
    fill = [default_inventory(racks=1, machines_per_rack=4), doc("all", 32, time_limit=3600)]
    few, reason = _blocked_queue_searches(monkeypatch, 10, fill)
    many, _ = _blocked_queue_searches(monkeypatch, 40, fill)
    assert reason == "Waiting for room: 16 GPUs on one network"
    assert few == many < 10
