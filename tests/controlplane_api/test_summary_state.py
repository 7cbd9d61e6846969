"""``GET /runs?view=summary`` follows each run: its state after every tick, its resource_version and
digest after a new document. Simulated time, no sleeps."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from reconciler.controlplane.clock import ManualClock
from reconciler.controlplane.engine import Engine
from reconciler.controlplane.inventory import default_inventory
from reconciler.controlplane.simulation import Outcome, SimulatedExecutor
from reconciler.controlplane.store import Store
from reconciler.runspec.normalize import spec_digest

from .conftest import Client
from .test_api import seed, tiny


@dataclass
class SimPlane:
    """An engine on a SQLite file with a simulated executor (each worker exits 0 after 60 s)."""

    engine: Engine
    clock: ManualClock

    def step(self) -> None:
        self.engine.step(self.clock.now())


@pytest.fixture
def sim(tmp_path):
    clock = ManualClock(1_000_000.0)
    store = Store(f"sqlite:///{tmp_path / 'astra.db'}")
    yield SimPlane(Engine(store, default_inventory(), SimulatedExecutor(Outcome()), clock.now()), clock)
    store.close()


def summaries(client: Client) -> dict[str, dict]:
    r = client.get("/api/runs", params={"view": "summary"})
    assert r.status_code == 200
    return {i["name"]: i for i in r.json()["items"]}


def test_a_summary_follows_every_tick_that_changes_its_run(sim):
    client = Client(sim)  # type: ignore[arg-type]

    def fresh() -> dict[str, dict]:
        """The summaries as an app that never made one answers them: what they must be now."""
        return summaries(Client(sim))  # type: ignore[arg-type]

    assert client.post("/api/runs", json=seed("llama-ft")).status_code == 201
    assert client.post("/api/runs", json=tiny("b")).status_code == 201
    queued = summaries(client)
    assert queued == fresh() and {s["state"] for s in queued.values()} == {"Pending"}
    assert summaries(client) == queued  # nothing changed: the same

    sim.step()  # placed and started (prepared at once)
    running = summaries(client)
    assert running == fresh()
    assert running["llama-ft"]["state"] == "Running" and running["llama-ft"] != queued["llama-ft"]

    sim.clock.advance(60.0)
    sim.step()  # every worker exits 0: only the state changes
    done = summaries(client)
    assert done == fresh()
    assert done["llama-ft"] == {**queued["llama-ft"], "state": "Completed"}


def test_a_summary_follows_a_state_change_alone_and_a_new_document(sim):
    client = Client(sim)  # type: ignore[arg-type]
    doc = tiny("b", array={"size": 3})
    client.post("/api/runs", json=doc)
    (before,) = summaries(client).values()
    assert before["state"] == "Pending" and before["spec_digest"] == spec_digest(doc)

    changed = tiny("b", array={"size": 3, "max_parallel": 1}, priority=2)  # in place
    changed["metadata"]["resource_version"] = before["resource_version"]
    assert client.put("/api/runs/b", json=changed).status_code == 200
    (updated,) = summaries(client).values()
    assert updated["resource_version"] > before["resource_version"]
    assert updated["spec_digest"] == spec_digest(changed) != before["spec_digest"]

    sim.engine.cancel("b", sim.clock.now())  # the run's state, and nothing of its document
    (cancelled,) = summaries(client).values()
    assert cancelled == {**updated, "state": "Cancelled"}
    assert cancelled["resource_version"] == updated["resource_version"]
    assert summaries(Client(sim)) == {"b": cancelled}  # type: ignore[arg-type]

    client.delete("/api/runs/b")
    assert summaries(client) == {}
    client.post("/api/runs", json=tiny("b"))  # the same name again: a new run, a new summary
    (again,) = summaries(client).values()
    assert again["state"] == "Pending" and again["resource_version"] > cancelled["resource_version"]
