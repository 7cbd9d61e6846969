"""The read-ahead: the source's memory and the cluster's run summaries, read in a forked process
while this one loads the files.

``read_ahead(source, cluster, store, files=n)`` starts, from ``READ_APART_FROM`` files and when
the cluster and the store can be read from a forked process (copies of them with connections of
their own, ``apart(plain_gets=True)``: the HTTP ones, whose GETs go plain on a socket when they
can; or, without copies, the cluster and store themselves when they say ``reads_apart``), a
process (``reconciler.cores.aside``) that reads the source's inventory (without specs when the
plan takes its fast path) and the cluster's run summaries, and sends them back as plain tuples
(pickled 20,000 at a time in a few milliseconds; as objects, in 50).
Its caller (``reconcile.load_and_plan``) starts it, loads the files, and then takes what it read:
``result()`` gives them back as ``Ahead``: plain data, or the error that stopped the
reads (after the retries ``reconcile.retrying`` gives them), which is the plan's error once the
files have loaded. ``result()`` is ``None`` when nothing was read ahead (too few files, a cluster
that cannot be read apart, no fork, or the forked process could not answer: the last two are
logged at debug level); the plan then reads them in its turn, with the same result.

Must not touch: the files, the load, the plan. It calls the store and the cluster only through their
protocols.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from .clusters.base import Cluster, summaries
from .cores import Aside, aside, forkable
from .runs import RunSummary
from .state import InventoryEntry, SourceStore

__all__ = ["READ_APART_FROM", "Ahead", "ReadAhead", "read_ahead"]

log = logging.getLogger(__name__)

#: From this many files, a plan reads the cluster in a forked process while it loads them.
READ_APART_FROM = 200


@dataclass(frozen=True)
class Ahead:
    """What was read ahead: the inventory and the summaries, or the error that stopped them."""

    inventory: dict[str, InventoryEntry] | None = None
    listed: list[RunSummary] | None = None
    failed: BaseException | None = None


class ReadAhead:
    """The forked read, if one was started (``result()``, then ``close()``)."""

    def __init__(self, apart: Aside | None):
        self._apart = apart
        self._answer: tuple[Ahead | None] | None = None  # once taken

    def result(self) -> Ahead | None:
        """What the other process read; ``None`` when it read nothing that can be used."""
        if self._apart is None:
            return None
        if self._answer is None:
            try:
                self._answer = (_unpacked(self._apart.result()),)
            except Exception as exc:  # it died or answered nothing: the plan reads in its turn
                log.debug(
                    "read-ahead: no answer (%s: %s): the plan reads in its turn", type(exc).__name__, exc
                )
                self._answer = (None,)
        return self._answer[0]

    def close(self) -> None:
        if self._apart is not None:
            self._apart.close()


def reads_apart(cluster: Cluster, store: SourceStore) -> bool:
    """Whether a forked process may read this cluster and store: they say so (``reads_apart``:
    nothing of theirs is open yet that a copy of this process would share)."""
    return getattr(cluster, "reads_apart", False) is True and getattr(store, "reads_apart", False) is True


def _apart(cluster: Cluster, store: SourceStore) -> tuple[Cluster, SourceStore] | None:
    """Copies of a cluster and store for the forked process to read with (``apart()``: the HTTP
    ones, each with connections of its own, their GETs plain: the process makes two and ends;
    httpx would cost it 40 ms of CPU, on a core the load uses); else ``None``."""
    copy_cluster, copy_store = getattr(cluster, "apart", None), getattr(store, "apart", None)
    if copy_cluster is None or copy_store is None:
        return None
    cluster_apart, store_apart = copy_cluster(plain_gets=True), copy_store(plain_gets=True)
    if cluster_apart is None or store_apart is None:
        return None
    return cluster_apart, store_apart


def read_ahead(source: str, cluster: Cluster, store: SourceStore, *, files: int, specs: bool) -> ReadAhead:
    """Start reading ``source``'s inventory (``specs``: with its specs) and the cluster's run
    summaries in a forked process, when it pays and can be done (see the module docstring)."""
    if not forkable(files, READ_APART_FROM):
        return ReadAhead(None)
    copies = _apart(cluster, store)
    if copies is None and not reads_apart(cluster, store):
        where = (cluster.address, getattr(store, "address", type(store).__name__))
        log.debug("read-ahead: %s or %s cannot be read apart: the plan reads in its turn", *where)
        return ReadAhead(None)
    if copies is not None:
        cluster, store = copies
    try:
        return ReadAhead(aside(lambda: _packed(_read(source, cluster, store, specs))))
    except OSError as exc:  # no fork here: the plan reads in its turn
        log.debug("read-ahead: cannot fork (%s): the plan reads in its turn", exc)
        return ReadAhead(None)


def _read(source: str, cluster: Cluster, store: SourceStore, specs: bool) -> Ahead:
    """The reads, in the forked process."""
    try:
        inventory = store.inventory(source, specs=specs)
        listed = None if specs else summaries(cluster)
    except Exception as exc:  # given back: the plan's error, once the files have loaded
        return Ahead(failed=exc)
    return Ahead(inventory, listed)


def _packed(got: Ahead) -> dict[str, Any]:
    """``got`` as plain tuples."""
    out: dict[str, Any] = {"failed": got.failed}
    if got.inventory is not None:
        out["inventory"] = {n: (e.spec, e.applied_at, e.file, e.digest) for n, e in got.inventory.items()}
    if got.listed is not None:
        out["listed"] = [(r.name, r.resource_version, r.state, r.spec_digest) for r in got.listed]
    return out


def _unpacked(packed: dict[str, Any]) -> Ahead:
    inventory = packed.get("inventory")
    listed = packed.get("listed")
    return Ahead(
        None if inventory is None else {n: InventoryEntry(*t) for n, t in inventory.items()},
        None if listed is None else [RunSummary(*t) for t in listed],
        packed.get("failed"),
    )
