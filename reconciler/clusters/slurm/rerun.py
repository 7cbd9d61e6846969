"""``rerun`` on Slurm: a finished run runs again, as the control plane's ``POST /runs/{name}/rerun``.

Whole: the run is deleted (its jobs long ended) and submitted again from its document. Failed
copies of an array: a new array ``<run>-rerun-<k>`` of only the copies that did not complete;
its batch script maps each copy onto its original index (``mapping``, reading the map of
``reconciler.runspec.rerun``). Only a finished run runs again (``Conflict`` says why not).

Must not touch: Slurm's words, the records' layout (both through the cluster's own methods).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.runspec.rerun import next_rerun_name, rerun_document, whole_rerun_document
from reconciler.runspec.vocabulary import WorkerState

from ..base import Conflict, LiveRun, NotFound

if TYPE_CHECKING:
    from .cluster import SlurmCluster

__all__ = ["rerun"]


def rerun(cluster: SlurmCluster, name: str, *, failed: bool) -> LiveRun:
    run = cluster.get_run(name)
    if run is None:
        raise NotFound(f"no run {name} on {cluster.address}")
    if not run.final:
        raise Conflict(
            f"run {name} is {run.state}: only a finished run runs again (wait for it, or cancel it)"
        )
    document = run.document
    if not failed:
        cluster.delete_run(name)
        return cluster.create_run(whole_rerun_document(document))
    if not (document.get("spec") or {}).get("array"):
        raise Conflict(f"run {name} is no array: --failed reruns an array's failed copies; rerun it whole")
    left = sorted(w.rank for w in cluster.workers(name) if w.state != WorkerState.COMPLETED)
    if not left:
        raise Conflict(f"every copy of run {name} completed: there is nothing to rerun")
    return cluster.create_run(rerun_document(document, next_rerun_name(name, cluster.records.names()), left))
