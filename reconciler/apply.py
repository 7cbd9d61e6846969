"""Carrying a plan out against a cluster: exactly the plan, under the source's lock, resumably.

``apply_plan(plan, cluster, store, …)``:

1. checks every document it will send (``validate_data``) before the first call, and stops if
   any fails (a dry run of the whole plan);
2. takes the source's apply lock (``Locked`` when another apply holds it), unless the caller
   holds it already (``apply_source`` takes it before it plans);
3. refuses a stale plan (``StalePlan``: a file or a run changed since the plan), having applied
   nothing and recorded nothing in the history;
4. applies the changes in order (the runs left as they are, the creates, the updates and
   replaces, then the deletes; each by name), each create and update with the resource
   version the plan saw, so that a concurrent change is a ``Conflict`` and never an
   overwrite; records each run in the inventory as soon as it is applied (so a killed apply
   resumes where it stopped: the next plan holds only what is left); a create that finds the
   run already there with the same normalised spec counts as done (unless another source's
   apply made it: ``astra.source``); the creates go ``BATCH_RUNS`` at a time where a batch is
   offered (``batches``): the store's own when it is the cluster's (``POST /runs:batch``: each
   batch's runs and their inventory entries are ONE write on the server, so a killed apply
   leaves whole batches, each recorded), else the cluster's (Slurm: submitted several at a time,
   each run made recorded after its batch);
5. records the apply in the history (who, when, commit, summary, result; the plan's revision,
   the runs by outcome, a note such as a rollback) and releases the lock, whatever happened.

Every document a plan with a revision (``Plan.revision``) creates or updates is sent with
astra's annotations (``stamped``): ``astra.revision`` (``main@sha1:…``, or ``sha256:…`` of files
in no repository), ``astra.source`` and ``astra.file`` (the file's path in its repository), so
that a run answers "which commit made me?". ``normalize`` drops them (``OWN_PREFIX``): they
never make a difference, and the inventory keeps the spec without them.

It follows ``Change.action`` only, never the reasons. The result (``ApplyResult``) tags each
run created, configured, replaced, deleted, unchanged, recorded, forgotten, failed or skipped.

``astra apply`` is three calls, which the CLI makes itself so that it shows the plan and asks
between them (Terraform's shape; the library never calls back into its caller): take the
source's lock (``locked``), plan the source's files (``reconcile.plan_source``) or take a saved
plan, then apply it (``apply_locked``: ``apply_plan`` as the lock's owner, at the files' git
commit), or, a dry run, check it without the lock and without changing anything
(``check_plan``). ``apply_source(source, cluster, store, …)`` makes the three calls at once
(``astra apply --yes``).
A plan of a dirty working tree (``Plan.revision["dirty"]``) is refused in CI (``CI=true``:
``DirtyTree``) unless ``allow_dirty``: what CI applies must be a commit.

What ``--wait`` follows after an apply is ``reconciler.waiting``'s (the one definition of a run
that settled).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, assert_never

from .batches import batch_creator
from .clusters.base import Cluster, ClusterError, Conflict, NotFound, Unreachable
from .clusters.batch import NOT_ATTEMPTED
from .load import FileCache
from .plan import Action, Change, Plan, compare, normalize
from .reconcile import ReconcileError, Source, StalePlan, check_fresh, plan_source
from .runspec.normalize import OWN_PREFIX, without_own
from .state import HistoryEntry, InventoryEntry, Lock, SourceStore, git_commit, owner

__all__ = [
    "BATCH_RUNS",
    "CHANGES_KEPT",
    "ApplyFailed",
    "ApplyResult",
    "DirtyTree",
    "Entry",
    "SourceApplied",
    "apply_locked",
    "apply_plan",
    "apply_source",
    "check_plan",
    "locked",
    "preflight",
    "refuse_dirty",
]


#: At most this many runs of each outcome are named in a history entry (the counts are whole).
CHANGES_KEPT = 50
#: At most this many creates go in one batch (``POST /runs:batch``; the server takes up to 1,000).
BATCH_RUNS = 500


class ApplyFailed(Exception):
    """The plan cannot be applied as it is (a document the cluster would refuse)."""


class DirtyTree(ReconcileError):
    """In CI, the files differ from their commit: what is applied must be committed."""


@dataclass(frozen=True)
class Entry:
    address: str
    action: str
    outcome: str  # created, configured, replaced, deleted, unchanged, recorded, forgotten, failed, skipped
    message: str = ""


@dataclass
class ApplyResult:
    source: str
    entries: list[Entry] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not any(e.outcome == "failed" for e in self.entries)

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self.entries:
            out[e.outcome] = out.get(e.outcome, 0) + 1
        return dict(sorted(out.items()))

    def failed(self) -> list[Entry]:
        return [e for e in self.entries if e.outcome == "failed"]

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "result": "applied" if self.ok else "failed",
            "error": self.error,
            "counts": self.counts,
            "entries": [e.__dict__ for e in sorted(self.entries, key=lambda e: e.address)],
        }


#: The order of step 4 by action (then by name): the runs left as they are (at most an inventory
#: entry written), then the creates, all together so that they go in full batches however the
#: new names fall among the old ones, then updates and replaces, and deletes last.
_RANK = {Action.noop: 0, Action.create: 1, Action.update: 2, Action.replace: 2, Action.delete: 3}


def _order(change: Change) -> tuple[int, str]:
    return (_RANK[change.action], change.address)


def preflight(plan: Plan) -> list[str]:
    """Every problem of the documents the plan would send, before anything is sent."""
    from .runspec.validate import validate_data  # jsonschema-rs and the rules: only with something to send

    problems = []
    for change in plan.changes:
        if change.after is None or change.action is Action.noop:
            continue
        for e in validate_data(change.after):
            problems.append(f"{change.address}: {e.format()}")
    return problems


def apply_plan(
    plan: Plan,
    cluster: Cluster,
    store: SourceStore,
    *,
    now: Callable[[], float],
    who: str,
    commit: str | None = None,
    on_entry: Callable[[Entry], None] | None = None,
    keep_going: bool = False,
    only: Collection[str] | None = None,
    note: str = "",
    held: Lock | None = None,
    fresh: bool = False,
) -> ApplyResult:
    """Apply ``plan`` (see the module docstring). ``only`` limits it to those runs; ``note`` is
    said in the history (a rollback says so by itself). ``held``: the source's lock, taken by
    the caller, who releases it (step 2 is skipped). ``fresh``: the caller made the plan just
    now, under that lock, from files a load validated (``apply_source``): step 1 is skipped (the
    cluster checks each document again as it takes it), step 3 does not read the files again
    (what is applied is the plan's documents, as shown), and of the source's state only the
    entries of runs left as they are with a document are read (not the whole state, which a
    watch's store reads to keep it from one pass to the next)."""
    return _apply_plan(
        plan,
        cluster,
        store,
        now=now,
        who=who,
        commit=commit,
        on_entry=on_entry,
        keep_going=keep_going,
        only=only,
        note=note,
        held=held,
        fresh=fresh,
    )


def _apply_plan(
    plan: Plan,
    cluster: Cluster,
    store: SourceStore,
    *,
    now: Callable[[], float],
    who: str,
    commit: str | None,
    on_entry: Callable[[Entry], None] | None,
    keep_going: bool,
    only: Collection[str] | None,
    note: str,
    held: Lock | None,
    fresh: bool,
) -> ApplyResult:
    """``apply_plan``'s work (the steps of the module docstring).

    Over 60 lines with its parameters, one a line: its body is the module docstring's steps, in order."""
    problems = [] if fresh else preflight(plan)
    if problems:
        raise ApplyFailed("the plan holds documents the cluster would refuse: " + "; ".join(problems))
    result = ApplyResult(plan.source)
    lock = held or store.lock(plan.source, who, now())
    started = False  # a plan refused as stale applied nothing: it leaves no history
    try:
        stale = check_fresh(plan, cluster, files=not fresh)
        if stale:
            raise StalePlan(stale)
        started = True
        changes = [c for c in sorted(plan.changes, key=_order) if only is None or c.address in only]
        if fresh:  # the entries of the runs left as they are with a document: no others are looked at
            kept = [c.address for c in changes if c.action is Action.noop and c.after is not None]
            inventory = store.inventory(plan.source, kept, specs=False) if kept else {}
        else:
            inventory = store.read(plan.source).inventory
        for change, done in _steps(changes, cluster, store, plan, inventory, now):
            failed = isinstance(done, ClusterError)
            outcome, message = ("failed", str(done)) if isinstance(done, ClusterError) else done
            entry = Entry(change.address, change.action.value, outcome, message)
            result.entries.append(entry)
            if on_entry:
                on_entry(entry)
            if failed and not keep_going:
                result.error = f"{change.address}: {done}"
                break
        if result.error is None:
            for name in sorted(plan.forget):
                if only is None or name in only:
                    store.record(plan.source, name, None)
                    result.entries.append(Entry(name, "forget", "forgotten"))
    except (ClusterError, StalePlan) as exc:
        result.error = str(exc)
        raise
    except BaseException as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        try:
            if started:
                outcome = "applied" if result.ok else f"failed: {result.error or 'some runs failed'}"
                store.add_history(plan.source, _record(plan, result, who, now(), commit, outcome, note))
        finally:
            if held is None:
                store.unlock(plan.source, lock.id)
    return result


def _record(
    plan: Plan, result: ApplyResult, who: str, when: float, commit: str | None, outcome: str, note: str
) -> HistoryEntry:
    """The history entry of an apply: its counts, and its details."""
    changes: dict[str, list[str]] = {}
    for e in sorted(result.entries, key=lambda e: e.address):
        if e.outcome in ("created", "configured", "replaced", "deleted"):
            names = changes.setdefault(e.outcome, [])
            if len(names) < CHANGES_KEPT:
                names.append(e.address)
    revision = plan.revision
    said = [note] if note else []
    if revision and revision.get("rollback"):
        said.insert(0, f"rollback to {revision.get('id')}")
    if commit is None and revision and revision.get("commit"):
        commit = revision["commit"] + ("-dirty" if revision.get("dirty") else "")
    return HistoryEntry(who, when, commit, plan.summary, outcome, revision, changes or None, "; ".join(said))


def refuse_dirty(plan: Plan, *, allow_dirty: bool, environ: Mapping[str, str] | None = None) -> None:
    """``DirtyTree`` when the plan's files differ from their commit, in CI, without ``allow_dirty``."""
    env = os.environ if environ is None else environ
    revision = plan.revision or {}
    if allow_dirty or not revision.get("dirty"):
        return
    if env.get("CI", "").lower() in ("1", "true", "yes"):
        raise DirtyTree(
            f"the files of source {plan.source} differ from commit {str(revision.get('commit', '?'))[:12]} "
            "(a dirty working tree): CI applies commits only; commit the changes, or give --allow-dirty"
        )


@dataclass
class SourceApplied:
    """What an apply did: the plan, and the apply's result (``None``: nothing applied, because
    the user said no or it was a dry run); ``problems``: a dry run's, of the documents
    the plan would send."""

    plan: Plan
    result: ApplyResult | None = None
    problems: list[str] = field(default_factory=list)
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        """Whether it did what was asked: applied without a failure, or checked without a problem."""
        if self.dry_run:
            return not self.problems
        return self.result is not None and self.result.ok


@contextlib.contextmanager
def locked(store: SourceStore, name: str, *, who: str, now: Callable[[], float]) -> Iterator[Lock]:
    """The source's apply lock, held for the block and released whatever happens (``Locked``
    when another apply holds it). Taken before the plan, as Terraform takes its state lock: an
    apply that another one holds off is refused at once, not after planning every file, and no
    other apply changes the source between the plan shown and the plan applied."""
    lock = store.lock(name, who, now())
    try:
        yield lock
    finally:
        store.unlock(name, lock.id)


def check_plan(plan: Plan, cluster: Cluster) -> SourceApplied:
    """A dry run of ``plan``: the problems of the documents it would send (``preflight``);
    ``StalePlan`` when it no longer holds. Nothing is changed and no lock is taken."""
    problems = preflight(plan)
    stale = check_fresh(plan, cluster)
    if stale:
        raise StalePlan(stale)
    return SourceApplied(plan, problems=problems, dry_run=True)


def apply_locked(
    plan: Plan,
    source: Source,
    cluster: Cluster,
    store: SourceStore,
    lock: Lock,
    *,
    now: Callable[[], float] = time.time,
    fresh: bool = False,
    on_entry: Callable[[Entry], None] | None = None,
) -> SourceApplied:
    """Apply ``plan`` under the source's ``lock`` (``locked``), as the lock's owner, at the files'
    git commit; a source applied without a failure is said Ready (``astra status``). ``fresh``:
    the plan was made just now, under that lock, of ``source``'s files (``apply_plan``'s)."""
    commit = None
    if not (plan.revision or {}).get("commit"):  # a plan that does not say (an older saved one)
        paths = sorted(plan.files) if not fresh and plan.files else list(source.paths)
        commit = git_commit(paths)
    result = apply_plan(
        plan,
        cluster,
        store,
        now=now,
        who=lock.owner,
        commit=commit,
        on_entry=on_entry,
        held=lock,
        fresh=fresh,
    )
    if result.ok:  # `astra status` says so (the loop's words: reconciler.applied)
        from .applied import ready_status

        store.set_status(plan.source, ready_status(plan, now()))
    return SourceApplied(plan, result)


def apply_source(
    source: Source,
    cluster: Cluster,
    store: SourceStore,
    *,
    plan: Plan | None = None,
    cache: FileCache | None = None,
    now: Callable[[], float] = time.time,
    who: str | None = None,
    dry_run: bool = False,
    on_entry: Callable[[Entry], None] | None = None,
    allow_dirty: bool = False,
) -> SourceApplied:
    """``astra apply --yes`` in one call: plan ``source``'s files (or take the saved ``plan``,
    which must be ``source``'s), then check it (``dry_run``: ``check_plan``) or apply it as
    ``who`` (default: this user, host and process) under the source's lock, taken before the
    plan (``locked``, ``apply_locked``). ``LoadFailed``, ``StalePlan``, ``ApplyFailed``,
    ``Locked``, ``DirtyTree`` and the cluster's errors rise as ``apply_plan`` raises them. A
    caller that shows the plan and asks first (the CLI) makes the same three calls itself."""

    def planned() -> Plan:
        return plan if plan is not None else plan_source(source, cluster, store, now(), cache=cache)

    if dry_run:
        return check_plan(planned(), cluster)
    with locked(store, plan.source if plan is not None else source.name, who=who or owner(), now=now) as lock:
        made = planned()
        refuse_dirty(made, allow_dirty=allow_dirty)
        return apply_locked(
            made, source, cluster, store, lock, now=now, fresh=plan is None, on_entry=on_entry
        )


def stamped(change: Change, plan: Plan) -> dict[str, Any]:
    """The document ``change`` sends: its ``after``, with astra's annotations when the plan says
    its revision (see the module docstring)."""
    assert change.after is not None
    revision = plan.revision
    if not revision or not revision.get("id"):
        return change.after
    meta = dict(change.after.get("metadata") or {})
    kept = {k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith(OWN_PREFIX)}
    own = {"astra.revision": str(revision["id"]), "astra.source": plan.source}
    if change.file is not None:
        top = revision.get("top")
        where = os.path.relpath(os.path.abspath(change.file), top) if top else os.path.normpath(change.file)
        own["astra.file"] = where.replace(os.sep, "/")
    meta["annotations"] = dict(sorted({**kept, **own}.items()))
    return {**change.after, "metadata": meta}


def _steps(
    changes: list[Change],
    cluster: Cluster,
    store: SourceStore,
    plan: Plan,
    inventory: dict[str, InventoryEntry],
    now: Callable[[], float],
) -> Iterator[tuple[Change, tuple[str, str] | ClusterError]]:
    """Each change and what applying it did (an outcome and a message, or the cluster's error),
    in order. Consecutive creates go ``BATCH_RUNS`` at a time in one call where the store or the
    cluster offers one (``batches.batch_creator``); a create the batch did not make is applied
    on its own, which says why in the single call's words. ``Unreachable`` and ``StalePlan`` are
    raised."""

    def one(change: Change) -> tuple[str, str] | ClusterError:
        try:
            return _apply_one(change, cluster, store, plan, inventory, now)
        except (Unreachable, StalePlan):
            raise
        except ClusterError as exc:
            return exc

    batch = batch_creator(cluster, store)
    pending = deque(changes)
    ahead = _Ahead(plan)
    try:
        while pending:
            if batch is None or pending[0].action is not Action.create:
                change = pending.popleft()
                yield change, one(change)
                continue
            chunk = [pending.popleft()]
            while pending and pending[0].action is Action.create and len(chunk) < BATCH_RUNS:
                chunk.append(pending.popleft())
            files = {c.address: c.file for c in chunk if c.file is not None}
            documents, texts = ahead.take(chunk)
            ahead.start(list(itertools.islice(itertools.takewhile(_creates, pending), BATCH_RUNS)))
            statuses = batch(plan.source, documents, files, now(), texts)
            if statuses is None:  # the cluster has no batch route: run by run
                batch = None
                pending.extendleft(reversed(chunk))
                continue
            for i, (change, status) in enumerate(zip(chunk, statuses, strict=True)):
                if status == 201:
                    yield change, ("created", "")
                elif status == NOT_ATTEMPTED:
                    pending.extendleft(reversed(chunk[i:]))
                    break
                else:
                    yield change, one(change)
    finally:
        ahead.close()


def _creates(change: Change) -> bool:
    return change.action is Action.create


class _Ahead:
    """The next batch made ready (its documents stamped, their texts written) in a thread while
    the current one is on the wire: this process only waits for the server's answer then. A
    batch that is not the one made ready (a create before it failed) is made on the spot."""

    def __init__(self, plan: Plan):
        self._plan = plan
        self._pool: ThreadPoolExecutor | None = None
        self._next: tuple[list[str], Future[tuple[list[dict[str, Any]], list[bytes]]]] | None = None

    def take(self, chunk: list[Change]) -> tuple[list[dict[str, Any]], list[bytes]]:
        """``chunk``'s documents and texts: as made ready, else made now."""
        ready, self._next = self._next, None
        if ready is not None and ready[0] == [c.address for c in chunk]:
            return ready[1].result()
        return _batch_of(chunk, self._plan)

    def start(self, chunk: list[Change]) -> None:
        """Make ``chunk`` ready meanwhile (nothing when it is empty)."""
        if not chunk:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="astra-batch")
        self._next = ([c.address for c in chunk], self._pool.submit(_batch_of, chunk, self._plan))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _batch_of(chunk: list[Change], plan: Plan) -> tuple[list[dict[str, Any]], list[bytes]]:
    from .clusters.batch import batch_texts

    documents = [stamped(c, plan) for c in chunk]
    return documents, batch_texts(documents)


def _apply_one(
    change: Change,
    cluster: Cluster,
    store: SourceStore,
    plan: Plan,
    inventory: dict[str, InventoryEntry],
    now: Callable[[], float],
) -> tuple[str, str]:
    name, source = change.address, plan.source

    def remember() -> None:
        assert change.after is not None
        store.record(source, name, InventoryEntry(without_own(change.after), now(), change.file))

    match change.action:
        case Action.noop:
            held = inventory.get(name)
            if change.after is None or (
                held is not None and held.records(without_own(change.after), change.file)
            ):
                return "unchanged", ""
            remember()
            return "recorded", ""
        case Action.create:
            message = _create(cluster, change, plan)
            remember()
            return "created", message
        case Action.update:
            assert change.after is not None and change.resource_version is not None
            cluster.update_run(name, stamped(change, plan), change.resource_version)
            remember()
            return "configured", ""
        case Action.replace:
            live = cluster.get_run(name)
            if live is not None and live.resource_version != change.resource_version:
                raise Conflict(f"run {name} changed on the cluster since the plan: not replaced")
            if live is not None:
                with contextlib.suppress(NotFound):
                    cluster.delete_run(name)
            message = _create(cluster, change, plan)
            remember()
            return "replaced", message
        case Action.delete:
            try:
                cluster.delete_run(name)
                message = ""
            except NotFound:
                message = "already gone"
            store.record(source, name, None)
            return "deleted", message
        case _:
            assert_never(change.action)


def _create(cluster: Cluster, change: Change, plan: Plan) -> str:
    """Create the run; one already there with the same normalised spec counts as done."""
    assert change.after is not None
    try:
        cluster.create_run(stamped(change, plan))
        return ""
    except Conflict:
        live = cluster.get_run(change.address)
        made_by = None if live is None else ((live.document.get("metadata") or {}).get("annotations") or {})
        theirs = made_by is not None and made_by.get("astra.source") not in (None, plan.source)
        if (
            live is not None
            and not theirs
            and not compare(without_own(change.after), normalize(live.document), None)[1]
        ):
            return "already there with this spec: counted as done"
        raise  # another source's run (its create won a race with this one) is never taken


# ---- --wait -------------------------------------------------------------------------------------
