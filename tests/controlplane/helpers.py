"""Run documents for the control-plane tests: real specs, validated by ``parse_run``."""

from __future__ import annotations

from typing import Any

from reconciler.controlplane.scheduler import MarkRun, PlaceWorker, RequeueWorker, StartWorker
from reconciler.controlplane.simulation import Simulation

__all__ = ["doc", "places", "requeues", "run_marks", "starts"]

GIB = 1024**3


def doc(
    name: str,
    gpus: int | None = 1,
    *,
    cpu: int | None = None,
    mem: int | None = None,
    per_gpu: dict | None = None,
    restart_policy: str | None = None,
    time_limit: int | str | None = None,
    gpu: dict | None = None,
    resources: dict | None = None,
    **spec: Any,
) -> dict:
    """A run document; ``spec`` keys go under ``spec`` as they are."""
    res: dict[str, Any] = dict(resources or {})
    if gpus is not None:
        res["gpu_requests"] = {"count": gpus, **(gpu or {})}
    if cpu is not None:
        res["cpu_cores"] = cpu
    if mem is not None:
        res["memory_bytes"] = mem
    if per_gpu is not None:
        res["per_gpu"] = per_gpu
    template: dict[str, Any] = {"image": "busybox", "requested_resources": res}
    if restart_policy is not None:
        template["restart_policy"] = restart_policy
    if time_limit is not None:
        template["time_limit_seconds"] = time_limit
    body: dict[str, Any] = {"task_template": template}
    body.update(spec)
    return {"metadata": {"name": name}, "spec": body}


def places(
    sim: Simulation, worker: str | None = None, run: str | None = None
) -> list[tuple[float, PlaceWorker]]:
    return [
        (t, d)
        for t, d in sim.log
        if isinstance(d, PlaceWorker)
        and (worker is None or d.worker == worker)
        and (run is None or sim.worker(d.worker).run == run)
    ]


def starts(sim: Simulation, worker: str) -> list[float]:
    return [t for t, d in sim.log if isinstance(d, StartWorker) and d.worker == worker]


def requeues(sim: Simulation, worker: str) -> list[tuple[float, RequeueWorker]]:
    return [(t, d) for t, d in sim.log if isinstance(d, RequeueWorker) and d.worker == worker]


def run_marks(sim: Simulation, run: str) -> list[tuple[float, MarkRun]]:
    return [(t, d) for t, d in sim.log if isinstance(d, MarkRun) and d.run == run]
