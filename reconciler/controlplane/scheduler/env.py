"""Inside a worker: the environment Astraeus sets for it (CONTRACT §6).

Owns: ``worker_env``: the template's own ``env`` (its text values: a secret's is the
executor's to add) with the rank and size variables over it
(``RANK``, ``WORLD_SIZE`` and their Slurm names), an array copy's index and size (a rerun's
copy: the original index and size, ``runspec.rerun``), and, for a
worker of a run spread over several workers, where its leader listens (``MASTER_ADDR``,
``MASTER_PORT``). Array copies get no ``MASTER_ADDR``: they are independent. A started worker
also gets ``ASTRAEUS_ATTEMPT`` (0 on its first start, one more on each restart) and, once it was
restarted, ``ASTRAEUS_RESTART_REASON`` (``runspec.lifecycle``: Preempted, Failed, MachineLost…).

Must not touch: processes, the store, placement (the leader's address comes in as an argument).
"""

from __future__ import annotations

from reconciler.runspec.messages import MASTER_PORT
from reconciler.runspec.models import Run
from reconciler.runspec.rerun import array_map

from .records import NewWorker, WorkerRecord

__all__ = ["worker_env"]


def worker_env(run: Run, worker: WorkerRecord | NewWorker, leader_address: str | None) -> dict[str, str]:
    """The environment Astraeus sets in a worker (CONTRACT §6), over the template's own env."""
    spec = run.spec
    template = spec.task_template
    if worker.group is not None and spec.task_groups:
        template = next(g.task_template for g in spec.task_groups if g.name == worker.group)
    # a secret's value is not the scheduler's to know: the executor adds it (``secret_refs``)
    env = {k: v for k, v in (template.env or {}).items() if isinstance(v, str)} if template else {}
    rank, size = str(worker.rank), str(worker.world_size)
    env.update({"RANK": rank, "WORLD_SIZE": size, "SLURM_PROCID": rank, "SLURM_NTASKS": size})
    if spec.array is not None:
        mapped = array_map(run.metadata.annotations)  # a rerun's copy: its original index and size
        if mapped is not None:
            rank, size = str(mapped.index(worker.rank)), str(mapped.size)
            env.update({"RANK": rank, "WORLD_SIZE": size, "SLURM_PROCID": rank, "SLURM_NTASKS": size})
        env.update(
            {"ASTRAEUS_ARRAY_TASK_ID": rank, "ASTRAEUS_ARRAY_SIZE": size, "ASTRAEUS_REPLICA_INDEX": rank}
        )
    elif worker.world_size > 1:
        env.update({"MASTER_ADDR": leader_address or "", "MASTER_PORT": str(MASTER_PORT)})
    if isinstance(worker, WorkerRecord):  # started: which start this is, and why it came again
        env["ASTRAEUS_ATTEMPT"] = str(max(worker.attempts - 1, 0))
        if worker.restart_reason is not None:
            env["ASTRAEUS_RESTART_REASON"] = worker.restart_reason
    return dict(sorted(env.items()))
