"""Which call creates a batch of runs: the apply's choice between two, in one place.

Owns ``batch_creator(cluster, store)``: a function ``(source, documents, files, applied_at,
texts) -> statuses`` (one HTTP-like status per document: 201 created, else the create is done
again on its own, which says why in the single call's words), or ``None`` when neither offers a
batch (then the apply goes run by run):

- the store's ``create_runs`` when the store is kept by the cluster itself (the same address:
  ``POST /runs:batch``, each batch's runs and their inventory entries ONE write on the server);
- else the cluster's ``create_runs`` (Slurm: the jobs submitted several at a time, none observed
  until the next plan), the runs made recorded in the source's inventory afterwards, in one
  write where the store offers ``record_all``.

Must not touch: the plan, the order of the changes (the caller's), the cluster's internals.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .clusters.base import Cluster, ClusterError, Conflict
from .runspec.normalize import without_own
from .state import InventoryEntry, SourceStore

__all__ = ["BatchCreator", "batch_creator"]

#: ``(source, documents, files, applied_at, texts) -> statuses``, or ``None`` (no batch route).
BatchCreator = Callable[[str, list[dict[str, Any]], dict[str, str], float, list[bytes]], "list[int] | None"]


def batch_creator(cluster: Cluster, store: SourceStore) -> BatchCreator | None:
    """The batch to create runs with (see the module docstring), or ``None``."""
    kept_by = getattr(getattr(store, "cluster", None), "address", None)  # the store's own cluster
    if kept_by == cluster.address and callable(getattr(store, "create_runs", None)):
        return store.create_runs  # type: ignore[attr-defined, no-any-return]
    create_runs = getattr(cluster, "create_runs", None)
    if not callable(create_runs):
        return None

    def by_cluster(
        source: str,
        documents: list[dict[str, Any]],
        files: dict[str, str],
        applied_at: float,
        texts: list[bytes],
    ) -> list[int]:
        made = create_runs(documents)
        names = [d["metadata"]["name"] for d in documents]
        entries = {
            name: InventoryEntry(without_own(d), applied_at, files.get(name))
            for name, d, m in zip(names, documents, made, strict=True)
            if m is None
        }
        record_all = getattr(store, "record_all", None)
        if callable(record_all):
            record_all(source, entries)
        else:
            for run, entry in entries.items():
                store.record(source, run, entry)
        return [_status(m) for m in made]

    return by_cluster


def _status(made: ClusterError | None) -> int:
    if made is None:
        return 201
    return 409 if isinstance(made, Conflict) else 422
