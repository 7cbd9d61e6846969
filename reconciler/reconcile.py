"""The steps between the files and a plan that touch the world: observe, plan, check freshness.

``make_plan(source, loaded, cluster, store, now)`` reads the source's inventory (``state``),
observes the runs it is concerned with (``observe``; the workers of runs it might stop, for
the cost), and calls the pure ``build_plan``. It refuses a failed load (``LoadFailed``): a
failed load is never an empty desired set.

The fast path (``FAST_PATH``, on unless a test turns it off; same plans as without it): the
live runs are listed as summaries (``clusters.base.summaries``: ``GET /runs?view=summary`` over
http), each with the digest of its normalised document; the desired digests come with the load
cache, the last-applied ones from ``applied_digests``. A run whose three digests are one is a
noop without ``compare`` and without its live document; the documents of the others (and of
runs a prune would delete) are fetched, one by one when few, else in one list, and planned in
full. Workers are fetched only for the runs that may be stopped among those.

``applied_digests(source, entries, tag=, cache=)``: the digest of each inventory entry's
normalised spec; remembered in this process (by entry), and on disk under the cache folder
(``applied/``) keyed by the source's name and tag (its ETag, else its resource_version): an
entry's digest is reused when the tag and the entry's ``applied_at`` and ``file`` match.

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

import gc
import hashlib
import json
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import stamina

from .clusters.base import Cluster, LiveRun, Unreachable, WorkerInfo, summaries
from .load import FileCache, Loaded, load_source
from .plan import Plan, build_plan, stopping
from .spec.errors import FieldError
from .spec.normalize import digest as doc_digest
from .spec.normalize import normalize
from .state import InventoryEntry, SourceState, SourceStore

__all__ = [
    "LoadFailed",
    "ReconcileError",
    "Source",
    "StalePlan",
    "applied_digests",
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
    inventory: dict[str, InventoryEntry] | None = None,
    cache: FileCache | None = None,
    fast: bool | None = None,
) -> Plan:
    """The plan for ``source`` now (see the module docstring). ``inventory``: the source's, when
    the caller has just read it (else it is read here). ``cache``: where the last-applied digests
    are kept between processes. ``fast``: the fast path (default ``FAST_PATH``)."""
    if not loaded.ok:
        raise LoadFailed(loaded.errors)
    tag = None
    if inventory is None:
        state = store.read(source.name)
        inventory = state.inventory
        tag = _tag(store, state)
    concerned = set(loaded.runs) | set(inventory)
    if scope is not None:
        concerned &= set(scope)
    use_fast = FAST_PATH if fast is None else fast
    unchanged: set[str] = set()
    if use_fast and (scope is None or len(concerned) > _GET_EACH_LIMIT):
        live, unchanged = _observe_fast(source, loaded, cluster, inventory, concerned, tag, cache)
    else:
        live = observe(cluster, concerned if scope is not None else None)
        live = {n: r for n, r in live.items() if n in concerned}
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
    tag: str | None,
    cache: FileCache | None,
) -> tuple[dict[str, LiveRun], set[str]]:
    """The live runs (from summaries where no document is needed) and the unchanged runs."""
    listed = {s.name: s for s in summaries(cluster) if s.name in concerned}
    last = applied_digests(source.name, inventory, tag=tag, cache=cache)
    live: dict[str, LiveRun] = {}
    unchanged: set[str] = set()
    need: list[str] = []
    for name, summary in listed.items():
        want = loaded.runs.get(name)
        if want is None:
            if source.prune:
                need.append(name)  # a delete shows the live document
            else:
                live[name] = summary.live()  # only listed as not pruned
            continue
        known = want.digest
        if known is not None and name in inventory and known == summary.spec_digest == last.get(name):
            unchanged.add(name)
            live[name] = summary.live()
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


def _tag(store: SourceStore, state: SourceState) -> str:
    """What names this reading of the source: the store, and its ETag or resource_version."""
    tag_of = getattr(store, "tag", None)
    etag = tag_of(state.name) if callable(tag_of) else None
    where = getattr(store, "address", None) or getattr(store, "url", None) or type(store).__name__
    return f"{where}|{etag or state.resource_version}"


#: last-applied digests of this process, by entry: (the spec, its digest); the spec is kept so
#: that its id is not reused
_MEMO: dict[int, tuple[dict[str, Any], str | None]] = {}
_MEMO_MAX = 200_000


def applied_digests(
    source: str,
    entries: Mapping[str, InventoryEntry],
    *,
    tag: str | None = None,
    cache: FileCache | None = None,
) -> dict[str, str | None]:
    """The digest of each entry's normalised spec (see the module docstring)."""
    path = None
    stored: dict[str, Any] = {}
    if tag is not None and cache is not None and cache.folder is not None:
        key = hashlib.sha256(source.encode()).hexdigest()
        path = cache.folder / "applied" / f"{key}.json"
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            if isinstance(data, dict) and data.get("tag") == tag and data.get("version") == _APPLIED_VERSION:
                stored = data.get("runs") or {}
        except (OSError, ValueError):
            stored = {}
    if len(_MEMO) > _MEMO_MAX:
        _MEMO.clear()
    out: dict[str, str | None] = {}
    computed = False
    for name, entry in entries.items():
        held = _MEMO.get(id(entry.spec))
        if held is not None and held[0] is entry.spec:
            out[name] = held[1]
            continue
        kept = stored.get(name)
        if isinstance(kept, list) and len(kept) == 3 and kept[:2] == [entry.applied_at, entry.file]:
            h = kept[2]
        else:
            h = doc_digest(normalize(entry.spec))
            computed = True
        _MEMO[id(entry.spec)] = (entry.spec, h)
        out[name] = h
    if path is not None and (computed or set(stored) != set(entries)):
        runs = {n: [e.applied_at, e.file, out[n]] for n, e in entries.items()}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(
                json.dumps({"version": _APPLIED_VERSION, "tag": tag, "runs": runs}, separators=(",", ":")),
                encoding="utf-8",
            )
            os.replace(tmp, path)
        except OSError:
            pass  # only slower next time
    return out


_APPLIED_VERSION = "1"


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
        if name in (
            "list_runs",
            "list_run_summaries",
            "get_run",
            "create_run",
            "update_run",
            "delete_run",
            "workers",
            "logs",
        ):
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
    # one plan builds many small trees and no cycles: the cyclic collector would only walk them
    # again and again (a quarter of a warm load of 3,000 files); it runs again once the plan is made
    collecting = gc.isenabled()
    gc.disable()
    try:
        loaded = load_source(source.paths, template=source.template, sets=source.sets, cache=cache)
        return loaded, make_plan(source, loaded, cluster, store, now, cache=cache)
    finally:
        if collecting:
            gc.enable()
