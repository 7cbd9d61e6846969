"""``GET /runs?view=summary`` keeps each run's SUMMARY made once, and makes it again exactly when the
run changed: a tick that touched it or its workers, or a new document. Simulated time, no sleeps."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from reconciler.controlplane.clock import ManualClock
from reconciler.controlplane.engine import Engine
from reconciler.controlplane.inventory import default_inventory
from reconciler.controlplane.simulation import Outcome, SimulatedExecutor
from reconciler.controlplane.store import Store
from reconciler.spec.normalize import spec_digest

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


def test_a_summary_is_made_again_when_its_run_changes_and_only_then(sim):
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
    gang = running["llama-ft"]
    assert gang["state"] == "Running" and gang["gpus_held"] == 16
    assert gang["task_counts"] == {"Running": gang["workers_running"]}
    assert gang["started_at"] == sim.clock.now() and gang != queued["llama-ft"]

    sim.clock.advance(60.0)
    sim.step()  # every worker exits 0: only the state, counts and times change
    done = summaries(client)
    assert done == fresh()
    assert done["llama-ft"]["state"] == "Completed" and done["llama-ft"]["finished_at"] == sim.clock.now()
    assert done["llama-ft"]["gpus_held"] == 0 and done["llama-ft"]["workers_running"] == 0
    assert done["llama-ft"]["resource_version"] == queued["llama-ft"]["resource_version"]


def test_a_summary_follows_a_state_change_alone_and_a_new_document(sim):
    client = Client(sim)  # type: ignore[arg-type]
    doc = tiny("b", array={"size": 3})
    client.post("/api/runs", json=doc)
    (before,) = summaries(client).values()
    assert before["task_counts"] == {"Pending": 3} and before["spec_digest"] == spec_digest(doc)

    changed = tiny("b", command="false", array={"size": 4})
    changed["metadata"]["resource_version"] = before["resource_version"]
    assert client.put("/api/runs/b", json=changed).status_code == 200
    (updated,) = summaries(client).values()
    assert updated["resource_version"] > before["resource_version"]
    assert updated["spec_digest"] == spec_digest(changed) != before["spec_digest"]
    assert updated["task_counts"] == {"Pending": 4}

    sim.engine.cancel("b", sim.clock.now())  # the run's state, and nothing of its document
    (cancelled,) = summaries(client).values()
    assert cancelled["state"] == "Cancelled" and cancelled["finished_at"] == sim.clock.now()
    assert cancelled["resource_version"] == updated["resource_version"]
    assert summaries(Client(sim)) == {"b": cancelled}  # type: ignore[arg-type]

    client.delete("/api/runs/b")
    assert summaries(client) == {}
    client.post("/api/runs", json=tiny("b"))  # the same name again: a new run, a new summary
    (again,) = summaries(client).values()
    assert again["state"] == "Pending" and again["resource_version"] > cancelled["resource_version"]


def test_a_memoised_summary_is_served_without_being_made_again(sim, monkeypatch):
    client = Client(sim)  # type: ignore[arg-type]
    for name in ("a", "b"):
        client.post("/api/runs", json=tiny(name))
    summaries(client)
    made: list[str] = []
    real = sim.engine.state.task_counts
    monkeypatch.setattr(sim.engine.state, "task_counts", lambda run: made.append(run) or real(run))
    summaries(client)
    assert made == []
    sim.engine.meta["b"].changes += 1  # what a tick that touches b does
    summaries(client)
    assert made == ["b"]
