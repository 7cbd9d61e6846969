"""A PUT of a run's spec re-indexes that run alone: the scheduler's state after it is the state
rebuilt from every record (what the engine did before, at O(runs) a PUT). Simulated time."""

from __future__ import annotations

from reconciler.controlplane.scheduler import ClusterState

from .test_api import seed, tiny
from .test_summary_state import sim  # noqa: F401  (the fixture)


def indexes(state: ClusterState) -> dict:
    return {
        "holding_priorities": dict(state.holding_priorities),
        "free": state.free,
        "active": sorted(state.active),
        "pending": {n: sorted(w) for n, w in state.pending.items()},
        "on_machine": {m: sorted(w) for m, w in state.on_machine.items()},
    }


def test_an_update_in_place_moves_the_priority_of_the_workers_it_holds(sim):  # noqa: F811
    engine, now = sim.engine, sim.clock.now()
    engine.submit(seed("llama-ft"), now)
    engine.submit(tiny("b"), now)
    sim.step()  # both placed: their workers hold machines
    assert engine.state.holding_priorities == {0: 3}  # two gang workers and one
    for name, priority in (("llama-ft", 7), ("b", 3)):
        doc = seed("llama-ft") if name == "llama-ft" else tiny("b")
        doc["spec"]["priority"] = priority
        engine.update(name, doc, engine.meta[name].resource_version, sim.clock.now())
    assert engine.state.holding_priorities == {7: 2, 3: 1}
    assert engine.state.runs["llama-ft"].priority == 7
    rebuilt = ClusterState(engine.inventory, dict(engine.state.runs), dict(engine.state.workers))
    assert indexes(engine.state) == indexes(rebuilt)
    sim.clock.advance(60.0)
    sim.step()  # they end as before: every worker exits 0, and gives its machine back
    assert engine.state.holding_priorities == {}
    assert {r.name: str(r.state) for r in engine.state.runs.values()} == {
        "llama-ft": "Completed",
        "b": "Completed",
    }
