"""The workers admission creates are indexed at once (``ClusterState._add_created``): the state
that admitted them must hold, index for index, what a server restarted on the same records
builds one record at a time (``ClusterState``'s own ``_add_worker``, the plain path). Then a
tick of each decides the same."""

from __future__ import annotations

from reconciler.controlplane.inventory import load_inventory
from reconciler.controlplane.scheduler import ClusterState, plan_tick
from reconciler.controlplane.scheduler.outlook import copy_run, copy_worker
from reconciler.runspec.models import Run

from .helpers import doc

#: two machines of 8 GPUs: the array's copies, the two-machine run and the plain run cannot all
#: be placed at once
INVENTORY = load_inventory(
    [
        {"name": f"m-{i}", "gpus": 8, "gpu_model": "A100", "cpu_cores": 64, "memory_bytes": 512 * 2**30}
        for i in range(2)
    ]
)
INDEXES = (
    "run_workers",
    "pending",
    "counts",
    "final_counts",
    "active",
    "unsettled",
    "ready",
    "readying",
    "holding_priorities",
    "ws_gpus",
    "ws_runs",
    "on_machine",
    "free",
)


def _runs() -> list[Run]:
    return [
        Run.model_validate(doc("copies", 1, array={"size": 40, "max_parallel": 3})),
        Run.model_validate(
            {
                "metadata": {"name": "groups"},
                "spec": {
                    "task_groups": [
                        {"name": "lead", "replicas": 1, "task_template": {"image": "busybox"}},
                        {"name": "work", "replicas": 3, "task_template": {"image": "busybox"}},
                    ]
                },
            }
        ),
        Run.model_validate(doc("wide", 8, resources={"machines": 2})),
        Run.model_validate(doc("plain", 2)),
    ]


def _indexes(s: ClusterState) -> dict[str, object]:
    out = {name: getattr(s, name) for name in INDEXES}
    out["workers"] = {n: (w.run, w.rank, w.state, w.reason, w.machine) for n, w in s.workers.items()}
    out["order"] = {n: list(s.run_workers[n]) for n in s.run_workers}
    return out


def test_a_state_that_admitted_holds_what_its_records_rebuild():
    s = ClusterState(INVENTORY, {}, {})
    for i, run in enumerate(_runs()):
        s.submit(run, 0.0, f"default/default/{run.metadata.name}-{i}")
    while decisions := plan_tick(s, 0.0):  # settled, as a step settles
        s.apply(decisions, 0.0)
    made = {r.run.metadata.name: len(s.run_workers[n]) for n, r in s.runs.items()}
    assert made == {"copies": 40, "groups": 4, "wide": 2, "plain": 1}
    assert any(w.machine for w in s.workers.values())
    assert any(w.machine is None for w in s.workers.values())
    rebuilt = ClusterState(
        INVENTORY,
        {n: copy_run(r) for n, r in s.runs.items()},
        {n: copy_worker(w) for n, w in s.workers.items()},
    )
    assert _indexes(rebuilt) == _indexes(s)
    assert plan_tick(rebuilt, 1.0) == plan_tick(s, 1.0)
