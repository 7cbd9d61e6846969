"""The steps between the files and a plan that touch the world: observe, plan, check freshness.

``make_plan(source, loaded, cluster, store, now)`` reads the source's inventory (``state``),
observes the runs it is concerned with (``observe``; the workers of runs it might stop, for
the cost), and calls the pure ``build_plan``. It refuses a failed load (``LoadFailed``): a
failed load is never an empty desired set.

The fast path (``FAST_PATH``, on unless a test turns it off; same plans as without it): three
digests of each run's normalised document are compared, and a run whose three are one is a noop
without ``compare`` and without any of its documents. The desired digests come with the load
cache (``reconciler.load``), the last-applied ones with the inventory read without its specs
(``store.inventory(name, specs=False)``: the store keeps each entry's digest), the live ones
with the runs listed as summaries (``clusters.base.summaries``: ``GET /runs?view=summary`` over
http). Only the runs that differ get their live document (one by one when few, else in one
list), their last-applied spec (``store.inventory(name, runs)``) and their desired document
(loaded again from its file when the load cache answered for it), and are planned in full; so
do runs a prune would delete. Workers are fetched only for the runs that may be stopped among those.

``plan_source`` (what plan and apply call) loads, then plans; the inventory and the summaries
the plan reads first are read while the files load, and handed to ``make_plan``. From
``READ_APART_FROM`` files, when the cluster and the store can be read from a forked process
(``reads_apart``: the HTTP ones before their first call), a forked process reads them
(``cores.aside``) and sends them back as plain tuples; else, when the load runs on every core,
this process reads them meanwhile (``load_source(meanwhile=)``). A read that fails there (its
retries spent) is the plan's error, unless the files failed to load, which is said first.

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

import contextlib
import gc
import hashlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .clusters.base import Cluster, LiveRun, RunSummary, Unreachable, WorkerInfo, summaries
from .cores import aside, forkable
from .load import FileCache, Loaded, load_source
from .plan import Plan, build_plan, stopping
from .runspec.errors import FieldError
from .runspec.files import find_files
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
#: The plan's fast path (see the module docstring); tests run with it and without it.
FAST_PATH = True


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
    inventory: Mapping[str, InventoryEntry] | None = None,
    listed: Sequence[RunSummary] | None = None,
    fast: bool | None = None,
) -> Plan:
    """The plan for ``source`` now (see the module docstring). ``inventory``: the source's, and
    ``listed``: the cluster's run summaries, when the caller has just read them (else they are
    read here). ``fast``: the fast path (default ``FAST_PATH``)."""
    if not loaded.ok:
        raise LoadFailed(loaded.errors)
    use_fast = FAST_PATH if fast is None else fast
    if inventory is None:
        inventory = store.inventory(source.name, specs=not use_fast)
    concerned = set(loaded.runs) | set(inventory)
    if scope is not None:
        concerned &= set(scope)
    unchanged: set[str] = set()
    if use_fast and (scope is None or len(concerned) > _GET_EACH_LIMIT):
        live, unchanged = _observe_fast(source, loaded, cluster, inventory, concerned, listed)
    else:
        live = observe(cluster, concerned if scope is not None else None)
        live = {n: r for n, r in live.items() if n in concerned}
    compared = [
        n
        for n in concerned
        if n in loaded.runs and n in inventory and n not in unchanged and inventory[n].spec is None
    ]
    if compared:  # the last-applied specs of the runs to compare: only theirs are read
        inventory = {**inventory, **store.inventory(source.name, compared)}
    workers: dict[str, list[WorkerInfo]] = {}
    full = {n: r for n, r in live.items() if n not in unchanged}
    for name in stopping(loaded.runs, full, inventory, prune=source.prune, scope=scope):
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
        unchanged=unchanged,
    )


def _observe_fast(
    source: Source,
    loaded: Loaded,
    cluster: Cluster,
    inventory: Mapping[str, InventoryEntry],
    concerned: set[str],
    listed: Sequence[RunSummary] | None = None,
) -> tuple[dict[str, LiveRun | RunSummary], set[str]]:
    """The live runs (their summaries where no document is needed) and the unchanged runs."""
    found = {s.name: s for s in (summaries(cluster) if listed is None else listed) if s.name in concerned}
    live: dict[str, LiveRun | RunSummary] = {}
    unchanged: set[str] = set()
    need: list[str] = []
    for name, summary in found.items():
        want = loaded.runs.get(name)
        if want is None:
            if source.prune:
                need.append(name)  # a delete shows the live document
            else:
                live[name] = summary  # only listed as not pruned
            continue
        known = want.digest
        applied = inventory.get(name)
        if known is not None and applied is not None and known == summary.spec_digest == applied.digest:
            unchanged.add(name)
            live[name] = summary
        else:
            need.append(name)
    if len(need) > _GET_EACH_LIMIT:
        wanted = set(need)
        live.update((r.name, r) for r in cluster.list_runs() if r.name in wanted)
    else:
        for name in sorted(need):
            run = cluster.get_run(name)
            if run is not None:
                live[name] = run
    return live, unchanged


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
    if len(plan.live) > _GET_EACH_LIMIT:
        versions = {s.name: s.resource_version for s in summaries(cluster)}
    else:
        versions = {n: r.resource_version for n, r in observe(cluster, list(plan.live)).items()}
    for name, version in sorted(plan.live.items()):
        current = versions.get(name)
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
    """A cluster whose every call is retried on ``Unreachable`` (stamina: jittered, exponential).

    stamina is imported at the first failure: a call that succeeds (nearly all) costs nothing
    of its 20 ms import."""

    _RETRIED = frozenset(
        {
            "list_runs",
            "list_run_summaries",
            "get_run",
            "create_run",
            "update_run",
            "delete_run",
            "workers",
            "logs",
        }
    )

    def __init__(self, cluster: Cluster, attempts: int, timeout: float):
        self._cluster = cluster
        self.address = cluster.address
        self._attempts, self._timeout = attempts, timeout

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._cluster, name)
        if name not in self._RETRIED:
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return value(*args, **kwargs)
            except Unreachable:
                if self._attempts < 2:
                    raise
                import stamina

                again = stamina.retry(on=Unreachable, attempts=self._attempts - 1, timeout=self._timeout)
                return again(value)(*args, **kwargs)

        return call


def retrying(cluster: Cluster, *, attempts: int = 5, timeout: float = 60.0) -> Cluster:
    """``cluster`` with transient failures (``Unreachable``) retried; see the module docstring."""
    if isinstance(cluster, _Retrying):
        return cluster
    return _Retrying(cluster, attempts, timeout)  # type: ignore[return-value]


#: From this many files, a plan reads the cluster in a forked process while it loads them here
#: (``plan_source``), when the cluster and the store can be read from one (``reads_apart``).
READ_APART_FROM = 200


def _reads_apart(cluster: Cluster, store: SourceStore) -> bool:
    """Whether a forked process may read this cluster and store: they say so (``reads_apart``:
    nothing of theirs is open yet that a copy of this process would share)."""
    return getattr(cluster, "reads_apart", False) is True and getattr(store, "reads_apart", False) is True


def _packed(got: dict[str, Any]) -> dict[str, Any]:
    """What ``read_ahead`` read, as plain tuples: a forked process pickles 20,000 of them in a few
    milliseconds (as objects, in 50)."""
    out: dict[str, Any] = {}
    if "inventory" in got:
        out["inventory"] = {n: (e.spec, e.applied_at, e.file, e.digest) for n, e in got["inventory"].items()}
    if "listed" in got:
        out["listed"] = [(r.name, r.resource_version, r.state, r.spec_digest) for r in got["listed"]]
    if "failed" in got:
        out["failed"] = got["failed"]
    return out


def _unpacked(packed: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "inventory" in packed:
        out["inventory"] = {n: InventoryEntry(*t) for n, t in packed["inventory"].items()}
    if "listed" in packed:
        out["listed"] = [RunSummary(*t) for t in packed["listed"]]
    if "failed" in packed:
        out["failed"] = packed["failed"]
    return out


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
    # one plan builds many small trees and no cycles: the cyclic collector would only walk them
    # again and again (a quarter of a warm load of 3,000 files); it runs again once the plan is made
    collecting = gc.isenabled()
    gc.disable()

    def read_ahead() -> dict[str, Any]:
        """The source's inventory and the cluster's runs (what the plan reads first), or the
        error that stopped the reads (after the retries ``retrying`` gives them)."""
        got: dict[str, Any] = {}
        try:
            got["inventory"] = store.inventory(source.name, specs=not FAST_PATH)
            if FAST_PATH:
                got["listed"] = summaries(cluster)
        except Exception as exc:  # the plan's error, once the files have loaded
            got["failed"] = exc
        return got

    ahead: dict[str, Any] = {}
    found = find_files(source.paths)
    apart = None
    if _reads_apart(cluster, store) and forkable(len(found[0]), READ_APART_FROM):
        with contextlib.suppress(OSError):  # no fork: the reads are made here, in their turn
            apart = aside(lambda: _packed(read_ahead()))  # another process reads the cluster

    def take() -> None:
        """What the other process read (nothing when it could not say: make_plan reads it all)."""
        if "taken" not in ahead and apart is not None:
            ahead["taken"] = True
            with contextlib.suppress(Exception):
                ahead.update(_unpacked(apart.result()))

    try:
        # while forked processes load many files, this one reads the cluster, or waits for the
        # process that does; a load here takes the reads once it is done
        loaded = load_source(
            source.paths,
            template=source.template,
            sets=source.sets,
            cache=cache,
            found=found,
            meanwhile=take if apart is not None else lambda: ahead.update(read_ahead()),
        )
        take()
        if "failed" in ahead and loaded.ok:  # a load that failed is said first
            raise ahead["failed"]  # not read again: its retries are spent
        return loaded, make_plan(
            source, loaded, cluster, store, now, inventory=ahead.get("inventory"), listed=ahead.get("listed")
        )
    finally:
        if apart is not None:
            apart.close()
        if collecting:
            gc.enable()
