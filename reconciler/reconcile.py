"""The steps between the files and a plan that touch the world: observe, plan, check freshness.

``make_plan(source, loaded, cluster, store, now)`` reads the source's inventory (``state``),
observes the runs it is concerned with (``observe``; the workers of runs it might stop, for
the cost), and calls the pure ``build_plan``. It refuses a failed load (``LoadFailed``): a
failed load is never an empty desired set.

``check_fresh(plan, cluster)`` says why a plan no longer holds: a file it was made from
changed (sha256), or a run it looked at changed on the cluster (resource version).

``retrying(cluster)`` wraps a cluster so that every call is retried on ``Unreachable`` with
stamina's jittered exponential backoff; nothing else is retried here.

Exceptions::

    ReconcileError
    ├── LoadFailed      the files did not load, render or validate (carries every FieldError)
    └── StalePlan       a saved plan no longer matches the files or the cluster
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import stamina

from .clusters.base import Cluster, LiveRun, Unreachable, WorkerInfo
from .load import FileCache, Loaded, load_source
from .plan import Plan, build_plan, stopping
from .spec.errors import FieldError
from .state import InventoryEntry, SourceStore

__all__ = [
    "LoadFailed",
    "ReconcileError",
    "Source",
    "StalePlan",
    "check_fresh",
    "make_plan",
    "observe",
    "plan_source",
    "retrying",
]

#: Above this many runs, observe lists all runs in one call instead of getting each.
_GET_EACH_LIMIT = 50


class ReconcileError(Exception):
    """A reconcile step could not be done; the message is the one line users see."""


class LoadFailed(ReconcileError):
    def __init__(self, errors: Sequence[FieldError]):
        self.errors = list(errors)
        noun = "problem" if len(self.errors) == 1 else "problems"
        super().__init__(
            f"{len(self.errors)} {noun} in the files: nothing was planned (and nothing will be pruned)"
        )


class StalePlan(ReconcileError):
    def __init__(self, reasons: Sequence[str]):
        self.reasons = list(reasons)
        super().__init__("the saved plan is stale: " + "; ".join(self.reasons) + ": make a new plan")


@dataclass(frozen=True)
class Source:
    """A reconcile source: a name, the paths its files are in, and how to read and prune them."""

    name: str
    paths: tuple[str, ...]
    template: str | None = None
    sets: tuple[str, ...] = ()
    prune: bool = False
    allow_empty: bool = False
    options: dict[str, Any] = field(default_factory=dict, compare=False)


def observe(cluster: Cluster, names: Collection[str] | None = None) -> dict[str, LiveRun]:
    """The live runs: all of them, or those of ``names`` (got one by one when they are few)."""
    if names is None or len(names) > _GET_EACH_LIMIT:
        wanted = None if names is None else set(names)
        return {r.name: r for r in cluster.list_runs() if wanted is None or r.name in wanted}
    out = {}
    for name in sorted(names):
        run = cluster.get_run(name)
        if run is not None:
            out[name] = run
    return out


def make_plan(
    source: Source,
    loaded: Loaded,
    cluster: Cluster,
    store: SourceStore,
    now: float,
    *,
    scope: Collection[str] | None = None,
    inventory: dict[str, InventoryEntry] | None = None,
) -> Plan:
    """The plan for ``source`` now (see the module docstring). ``inventory``: the source's, when
    the caller has just read it (else it is read here)."""
    if not loaded.ok:
        raise LoadFailed(loaded.errors)
    if inventory is None:
        inventory = store.read(source.name).inventory
    concerned = set(loaded.runs) | set(inventory)
    if scope is not None:
        concerned &= set(scope)
    live = observe(cluster, concerned if scope is not None else None)
    live = {n: r for n, r in live.items() if n in concerned}
    workers: dict[str, list[WorkerInfo]] = {}
    for name in stopping(loaded.runs, live, inventory, prune=source.prune, scope=scope):
        workers[name] = cluster.workers(name)
    hashes = loaded.hashes()
    if scope is not None:
        used = {loaded.runs[n].file for n in concerned if n in loaded.runs}
        hashes = {p: h for p, h in hashes.items() if p in used or p in loaded.templates}
    return build_plan(
        source=source.name,
        cluster=cluster.address,
        desired=loaded.runs,
        live=live,
        inventory=inventory,
        now=now,
        prune=source.prune,
        allow_empty=source.allow_empty,
        files=hashes,
        workers=workers,
        scope=scope,
    )


def check_fresh(plan: Plan, cluster: Cluster) -> list[str]:
    """Why ``plan`` no longer holds (empty: it holds)."""
    reasons = []
    for path, digest in sorted(plan.files.items()):
        try:
            with open(path, "rb") as f:
                now = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            now = None
        if now != digest:
            reasons.append(f"{path} {'changed' if now else 'is gone'} since the plan")
    if plan.cluster != cluster.address:
        reasons.append(f"the plan is for {plan.cluster}, not {cluster.address}")
        return reasons
    live = observe(cluster, list(plan.live))
    for name, version in sorted(plan.live.items()):
        current = live[name].resource_version if name in live else None
        if current != version:
            what = (
                "was created"
                if version is None
                else "was deleted"
                if current is None
                else f"changed (resource_version {version} → {current})"
            )
            reasons.append(f"run {name} {what} on the cluster since the plan")
    return reasons


class _Retrying:
    """A cluster whose every call is retried on ``Unreachable`` (stamina: jittered, exponential)."""

    def __init__(self, cluster: Cluster, attempts: int, timeout: float):
        self._cluster = cluster
        self.address = cluster.address
        self._retry = stamina.retry(on=Unreachable, attempts=attempts, timeout=timeout)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._cluster, name)
        if name in ("list_runs", "get_run", "create_run", "update_run", "delete_run", "workers", "logs"):
            return self._retry(value)
        return value


def retrying(cluster: Cluster, *, attempts: int = 5, timeout: float = 60.0) -> Cluster:
    """``cluster`` with transient failures (``Unreachable``) retried; see the module docstring."""
    if isinstance(cluster, _Retrying):
        return cluster
    return _Retrying(cluster, attempts, timeout)  # type: ignore[return-value]


def plan_source(
    source: Source,
    cluster: Cluster,
    store: SourceStore,
    now: float,
    *,
    cache: FileCache | None = None,
) -> tuple[Loaded, Plan]:
    """Load the source's files and plan them: what ``astra plan`` and ``astra apply -f`` do.

    Raises ``LoadFailed`` (with every problem) when the files do not load.
    """
    loaded = load_source(source.paths, template=source.template, sets=source.sets, cache=cache)
    return loaded, make_plan(source, loaded, cluster, store, now)
