"""The steps between the files and a plan that touch the world, as one descent: load, observe, plan.

``plan_source(source, cluster, store, now)`` (what plan and apply call) is four steps, each a
function of the data the one before gave, each entered once:

1. **load** the files (``reconciler.load.load_source`` → ``Loaded``): refuses nothing, says
   every problem; a failed load stops here (``LoadFailed``): it is never an empty desired set;
2. **observe** the source's memory and the cluster (``observe_source`` → ``Observed``): the
   inventory, the live runs the source is concerned with, which of them are unchanged by
   digest, the workers of runs the plan might stop (for the cost), and which desired runs the
   plan must read in full;
3. **read** the documents of those runs (``reconciler.load.documents``: the load cache gave
   digests only);
4. **plan**: the pure ``reconciler.plan.build_plan``.

``make_plan(source, loaded, cluster, store, now)`` is steps 2 to 4 (the watch loop loads, and
refreshes, on its own), and refuses a plan that would take a run another source applied
(``reconciler.owners``: ``OwnedElsewhere``, a ``PlanError``).

**Where the files are, and what revision they are** (``reconciler.git``): a source's files are
read where ``source.checkout`` says (a snapshot of a commit, for a remote or ``--revision``;
shown by their paths in the repository: ``shown_as``), else from ``source.paths``, whose git
working tree is probed beside the load (``sources.Probe``: branch, commit, dirty). The plan
carries that revision (``Plan.revision``, ``with_revision``), from which apply stamps astra's
annotations on every run it creates or updates (``reconciler.apply``).

The fast path (``FAST_PATH``, on unless a test turns it off; same plans as without it): three
digests of each run's normalised document are compared, and a run whose three are one is a noop
without ``compare`` and without any of its documents. The desired digests come with the load
cache, the last-applied ones with the inventory read without its specs
(``store.inventory(name, specs=False)``), the live ones with the runs listed as summaries
(``clusters.base.summaries``: ``GET /runs?view=summary`` over http). Only the runs that differ
get their live document (one by one when few, else in one list), their last-applied spec and
their desired document, and are planned in full; so do runs a prune would delete. The path a
plan takes, and why it is not the fast one, is logged at debug level.

While a large source loads, the inventory and the summaries are read in a forked process when
the cluster and the store allow it (``reconciler.readahead``): ``load_and_plan`` starts it, loads
the files (which know nothing of it), then takes what it read and gives it to observe as
values; a read that fails there (its retries spent) is the plan's error, unless the files
failed to load, which is said first. A cold load on every core keeps digests only, as the load
cache does: a plan reads back the documents of the runs it must compare or create (step 3), so
that a plan of many unchanged runs holds none of their documents.

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
import logging
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .clusters.base import Cluster, LiveRun, RunSummary, Unreachable, WorkerInfo, summaries
from .git import Checkout, Probe, content_id
from .load import FileCache, Loaded, documents, load_source
from .owners import held_elsewhere
from .plan import Cost, Plan, build_plan, cost_of, in_scope, stopping
from .plan.held import hold_replaces
from .reach import only_files, within_reach
from .readahead import read_ahead
from .runs import DesiredItem
from .runspec.errors import FieldError
from .runspec.files import find_files
from .state import InventoryEntry, SourceStore

__all__ = [
    "LoadFailed",
    "Observed",
    "ReconcileError",
    "Source",
    "StalePlan",
    "check_fresh",
    "load_and_plan",
    "make_plan",
    "observe",
    "observe_source",
    "plan_source",
    "retrying",
    "revision_of",
    "shown_as",
    "with_revision",
]

#: Above this many runs, observe lists all runs in one call instead of getting each.
_GET_EACH_LIMIT = 50
#: The plan's fast path (see the module docstring); tests run with it and without it.
FAST_PATH = True

log = logging.getLogger(__name__)


class ReconcileError(Exception):
    """A reconcile step could not be done; the message is the one line users see."""


class LoadFailed(ReconcileError):
    """The files did not load, render or validate: ``errors`` holds every problem."""

    def __init__(self, errors: Sequence[FieldError]):
        self.errors = list(errors)
        noun = "problem" if len(self.errors) == 1 else "problems"
        super().__init__(
            f"{len(self.errors)} {noun} in the files: nothing was planned (and nothing will be pruned)"
        )


class StalePlan(ReconcileError):
    """A saved plan no longer matches the files or the cluster: ``reasons`` says how."""

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
    #: Where the files are read, and their revision (``None``: ``paths``, probed for git).
    checkout: Checkout | None = None
    #: Whether ``plan_source`` reads the git revision of ``paths``' working tree.
    probe: bool = True
    #: Runs to plan as replaced though unchanged (``--replace RUN``: ``plan.replace``).
    replace: tuple[str, ...] = ()


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


@dataclass
class Observed:
    """What observe found for one plan (plain data; see ``observe_source``).

    ``inventory``: the source's entries (with their specs where the plan compares); ``live``: the
    runs the source is concerned with as the cluster has them (a ``RunSummary`` where no
    document is needed); ``unchanged``: runs whose three digests are one; ``workers``: those of
    the runs the plan might stop; ``needed``: the desired runs the plan reads in full;
    ``by_digest``: whether the fast path was taken; ``budget``: the GPU-hour budget of the
    workspace the runs would be created in (``budget_of``), when the cluster has one."""

    inventory: Mapping[str, InventoryEntry]
    live: dict[str, LiveRun | RunSummary]
    unchanged: set[str] = field(default_factory=set)
    workers: dict[str, list[WorkerInfo]] = field(default_factory=dict)
    needed: set[str] = field(default_factory=set)
    by_digest: bool = False
    budget: dict[str, Any] | None = None


def budget_of(cluster: Cluster, creates: bool) -> dict[str, Any] | None:
    """The cluster's budget for its workspace (an optional method, ``budget``: the http
    cluster's ``GET /workspaces/{name}/budget``), asked only when the plan may create a run; no
    other cluster has one: ``None``."""
    ask = getattr(cluster, "budget", None)
    return ask() if creates and ask is not None else None


def observe_source(
    source: Source,
    loaded: Loaded,
    cluster: Cluster,
    store: SourceStore,
    *,
    scope: Collection[str] | None = None,
    inventory: Mapping[str, InventoryEntry] | None = None,
    listed: Sequence[RunSummary] | None = None,
    fast: bool | None = None,
) -> Observed:
    """Step 2 of a plan: the source's memory and the cluster, as the plan of ``loaded`` needs
    them. ``inventory``: the source's, and ``listed``: the cluster's run summaries, when the
    caller has just read them (else they are read here). ``fast``: the fast path (default
    ``FAST_PATH``)."""
    use_fast = FAST_PATH if fast is None else fast
    if inventory is None:
        inventory = store.inventory(source.name, specs=not use_fast)
    if source.prune and only_files(source.paths):  # named files prune only what they held
        files_of = {n: e.file for n, e in inventory.items()}
        inventory = within_reach(inventory, files_of, loaded.runs, set(loaded.files))
    concerned = in_scope(loaded.runs, inventory, scope)
    unchanged: set[str] = set()
    moved: set[str] = set()
    by_digest = use_fast and (scope is None or len(concerned) > _GET_EACH_LIMIT)
    if by_digest:
        live, unchanged, moved = _observe_fast(source, loaded, cluster, inventory, concerned, listed)
    else:
        log.debug(
            "plan: every run compared in full (%s)",
            "the fast path is off" if not use_fast else f"a scope of {len(concerned)} runs: each got alone",
        )
        live = dict(observe(cluster, concerned if scope is not None else None))
        live = {n: r for n, r in live.items() if n in concerned}
    changed = (concerned & loaded.runs.keys()) - unchanged  # set operations: 10,000 names in 1 ms
    compared = [n for n in changed if n in inventory and inventory[n].spec is None]
    if compared:  # the last-applied specs of the runs to compare: only theirs are read
        inventory = {**inventory, **store.inventory(source.name, compared)}
    full = {n: live[n] for n in live.keys() - unchanged}
    workers = {
        name: cluster.workers(name)
        for name in stopping(loaded.runs, full, inventory, prune=source.prune, scope=scope)
    }
    # in full: every desired run but the unchanged ones, and an unchanged one whose file moved
    # (its noop records the new file: ``build._unchanged``)
    needed = changed | moved
    budget = budget_of(cluster, any(n not in live for n in changed))
    return Observed(inventory, live, unchanged, workers, needed, by_digest, budget)


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
    """The plan for ``source`` now, from what was loaded: observe, read the documents the plan
    needs, plan (see the module docstring; the options are ``observe_source``'s)."""
    if not loaded.ok:
        raise LoadFailed(loaded.errors)
    seen = observe_source(
        source, loaded, cluster, store, scope=scope, inventory=inventory, listed=listed, fast=fast
    )
    desired = documents(loaded, seen.needed)
    if scope is None:
        hashes = loaded.hashes()
    else:  # the files of the runs in scope (a watch pass: one file), without visiting every file
        file_of = loaded.file_of
        hashes = loaded.hashes_of({file_of[n] for n in scope if n in file_of})
    made = build_plan(
        source=source.name,
        cluster=cluster.address,
        desired=desired,
        live=seen.live,
        inventory=seen.inventory,
        now=now,
        prune=source.prune,
        allow_empty=source.allow_empty,
        files=hashes,
        workers=seen.workers,
        scope=scope,
        unchanged=seen.unchanged,
    )
    if seen.budget is not None:
        made = replace(made, budget=seen.budget)
    made = held_elsewhere(made, seen.live, seen.inventory, store)  # a run is one source's
    return hold_replaces(made, exempt=source.replace)


def revision_of(checkout: Checkout | None, loaded: Loaded) -> dict[str, Any]:
    """The files' revision as a plan holds it: the commit's (with ``top``, the work tree's root,
    that apply names files from), else the hash of the files (``sha256:…``)."""
    if checkout is not None and checkout.revision is not None:
        return {**checkout.revision.to_json(), "top": checkout.top}
    return {"id": content_id(loaded.revision), "top": None}


def with_revision(plan: Plan, checkout: Checkout | None, loaded: Loaded) -> Plan:
    """``plan``, saying which revision of the files it was made from."""
    return replace(plan, revision=revision_of(checkout, loaded))


def shown_as(loaded: Loaded, checkout: Checkout | None) -> Loaded:
    """``loaded`` with its runs and problems named as ``checkout`` shows its files (a snapshot's
    files by their paths in the repository); as it is when they are read where they are shown."""
    if checkout is None or not checkout.moved:
        return loaded
    pairs = [
        (os.path.normpath(real), os.path.normpath(shown))
        for real, shown in zip(checkout.paths, checkout.shown, strict=True)
    ]

    def name(path: str | None) -> str | None:
        if path is None:
            return None
        for real, shown in pairs:
            if path == real or path.startswith(real + os.sep):
                rest = os.path.relpath(path, real)
                return shown if rest == "." else os.path.normpath(os.path.join(shown, rest))
        return path

    moved: dict[int, DesiredItem] = {}
    for f in loaded.files.values():
        entries = []
        for index, item in f.entries:
            again = DesiredItem(item.name, item.document, name(item.file), item.normalized, item.digest)
            moved[id(item)] = again
            entries.append((index, again))
        f.entries = entries
        f.errors = [replace(e, file=name(e.file)) for e in f.errors]
    loaded.runs = {n: moved.get(id(r), r) for n, r in loaded.runs.items()}
    loaded.errors = [replace(e, file=name(e.file)) for e in loaded.errors]
    loaded.base_errors = [replace(e, file=name(e.file)) for e in loaded.base_errors]
    return loaded


def _observe_fast(
    source: Source,
    loaded: Loaded,
    cluster: Cluster,
    inventory: Mapping[str, InventoryEntry],
    concerned: set[str],
    listed: Sequence[RunSummary] | None = None,
) -> tuple[dict[str, LiveRun | RunSummary], set[str], set[str]]:
    """The live runs (their summaries where no document is needed), the unchanged runs, and
    those of them whose file is not the one the inventory names (moved)."""
    found = {s.name: s for s in (summaries(cluster) if listed is None else listed) if s.name in concerned}
    live: dict[str, LiveRun | RunSummary] = {}
    unchanged: set[str] = set()
    moved: set[str] = set()
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
            if applied.file != want.file:
                moved.add(name)
        else:
            need.append(name)
    log.debug("plan: %d of %d runs unchanged by digest (the fast path)", len(unchanged), len(concerned))
    if len(need) > _GET_EACH_LIMIT:
        wanted = set(need)
        live.update((r.name, r) for r in cluster.list_runs() if r.name in wanted)
    else:
        for name in sorted(need):
            run = cluster.get_run(name)
            if run is not None:
                live[name] = run
    return live, unchanged, moved


def check_fresh(plan: Plan, cluster: Cluster, *, files: bool = True) -> list[str]:
    """Why ``plan`` no longer holds (empty: it holds). Without ``files``, the files it was made
    from are not read again (a plan made by this process for the apply it is about to make:
    what is applied is the plan's documents, as shown, whatever the files say since)."""
    reasons = []
    for path, digest in sorted(plan.files.items()) if files else ():
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

    def apart(self, *, plain_gets: bool = False) -> Cluster | None:
        """The cluster's copy for a forked process (``HttpCluster.apart``), retried alike."""
        copy = getattr(self._cluster, "apart", None)
        made = copy(plain_gets=plain_gets) if copy is not None else None
        return None if made is None else _Retrying(made, self._attempts, self._timeout)  # type: ignore[return-value]

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


def plan_source(
    source: Source,
    cluster: Cluster,
    store: SourceStore,
    now: float,
    *,
    cache: FileCache | None = None,
) -> Plan:
    """Load the source's files and plan them: what ``astra plan`` and ``astra apply -f`` do (the
    steps of the module docstring); ``LoadFailed`` (with every problem) when the files do not
    load."""
    return load_and_plan(source, cluster, store, now, cache=cache)[1]


def load_and_plan(
    source: Source,
    cluster: Cluster,
    store: SourceStore,
    now: float,
    *,
    cache: FileCache | None = None,
) -> tuple[Loaded, Plan]:
    """``plan_source``, with the load it planned (``Loaded.taken`` says which of the load's
    fast paths it took). The cyclic collector is left as the caller has it: the entries pause it
    (a command, a loop's pass; ``reconciler.collector``)."""
    checkout = source.checkout
    paths = checkout.paths if checkout is not None else source.paths
    probe = Probe(source.paths) if checkout is None and source.probe else None
    try:
        found = find_files(paths)
        ahead = read_ahead(source.name, cluster, store, files=len(found[0]), specs=not FAST_PATH)
        try:
            loaded = load_source(
                paths,
                template=source.template,
                sets=source.sets,
                cache=cache,
                found=found,
            )
            read = ahead.result()
        finally:
            ahead.close()
    finally:
        if probe is not None:
            revision, top = probe.result()
            checkout = Checkout(tuple(source.paths), tuple(source.paths), revision, top, top)
    loaded = shown_as(loaded, checkout)
    if read is not None and read.failed is not None and loaded.ok:  # a load that failed is said first
        raise read.failed  # not read again: its retries are spent
    made = make_plan(
        source,
        loaded,
        cluster,
        store,
        now,
        inventory=None if read is None else read.inventory,
        listed=None if read is None else read.listed,
    )
    made = with_revision(made, checkout, loaded)
    if source.replace:
        from .plan.replace import force_replace

        full = documents(loaded, source.replace)  # the load cache keeps digests, not documents
        made = force_replace(
            made, source.replace, lambda n: full[n].after() if n in full else None, _stops(cluster, now)
        )
    return loaded, made


def _stops(cluster: Cluster, now: float) -> Callable[[str], Cost | None]:
    """What replacing a run stops, read from the cluster (``--replace``'s plan says it as any
    replace's does)."""

    def cost(name: str) -> Cost | None:
        live = cluster.get_run(name)
        if live is None:
            return None
        return cost_of(live, None if live.final else cluster.workers(name), now)

    return cost
