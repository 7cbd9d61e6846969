"""The engine carries the scheduler's Stale timeout and its events through a store (seed 000's
Stale → Down), and keeps what its records do not hold when it rebuilds its state."""

from __future__ import annotations

from reconciler.controlplane.engine import Engine
from reconciler.controlplane.inventory import load_inventory
from reconciler.controlplane.scheduler import STALE_TIMEOUT_SECONDS, MachineUnreachable, WorkerState
from reconciler.controlplane.simulation import Outcome, SimulatedExecutor
from reconciler.controlplane.store import Store

LOST = "Machine m0 stopped reporting 5 min ago; counted as lost"


def run(name: str) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "task_template": {
                "image": "busybox",
                "command": "true",
                "requested_resources": {"gpu_requests": {"count": 8}},
            }
        },
    }


def test_a_stale_worker_is_down_after_the_timeout_even_across_a_rebuild(tmp_path):
    inv = load_inventory({"defaults": {"gpus": 8}, "machines": [{"name": "m0"}, {"name": "m1"}]})
    store = Store(f"sqlite:///{tmp_path / 'astra.db'}")
    engine = Engine(store, inv, SimulatedExecutor(Outcome(after=None)), 0.0)
    engine.submit(run("w"), 0.0)
    engine.submit(run("other"), 0.0)
    engine.step(0.0)
    assert engine.state.workers["w-0"].machine == "m0"
    engine.observe(MachineUnreachable("m0"), 10.0)
    engine.step(10.0)
    assert store.worker_row("w-0")["state"] == "Stale"
    engine.delete("other", 20.0)  # the state is rebuilt from its records
    assert engine.next_wakeup(20.0) == 10.0 + STALE_TIMEOUT_SECONDS
    engine.step(10.0 + STALE_TIMEOUT_SECONDS)
    w = engine.state.workers["w-0"]
    assert w.state is WorkerState.PENDING and w.restarts == 1
    events = [(e["kind"], e["state"], e["reason"]) for e in store.event_rows("w")]
    assert ("LoseWorker", "Down", LOST) in events
    engine.step(10.0 + STALE_TIMEOUT_SECONDS + 10)
    assert engine.state.workers["w-0"].machine == "m1"  # m0 is still silent
    store.close()
