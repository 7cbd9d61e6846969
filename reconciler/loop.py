"""The reconcile loop (``astra watch``): keep the cluster equal to the files, in named steps.

``Reconciler.reconcile_once(changed=None)`` runs the fixed steps **load → validate → render →
plan → apply → prune** for one source (load, validate and render are one pass of
``reconciler.load``; their failures get their own reasons). The source's state is read once a
pass (its inventory for the scope, the plan and the nothing-to-do check; the apply reads it again
under the lock, a conditional GET that the control plane answers 304 when only this process
wrote since). The status is written at each step boundary when it changed (one small write each)
and, whatever happens, in a ``finally``:

=============  =========================  ==========================================================
state          reason                     when
=============  =========================  ==========================================================
Reconciling    Progressing                a step is running (``step`` says which)
Ready          ReconciliationSucceeded    every step passed; ``observed_revision`` set to the files'
Stalled        LoadFailed                 a file cannot be read or parsed          (terminal)
Stalled        ValidationFailed           a run spec is invalid, or names clash    (terminal)
Stalled        RenderFailed               a template failed                        (terminal)
Stalled        PlanFailed                 the plan was refused (``--allow-empty``) (terminal)
Reconciling    ObserveFailed              the cluster could not be read: retried after a backoff
Reconciling    ApplyFailed                some runs failed to apply: each retried after its backoff
Reconciling    PruneFailed                some runs failed to delete: each retried after its backoff
Reconciling    Locked                     another apply holds the lock: retried after a backoff
=============  =========================  ==========================================================

A terminal failure (``Stalled``) is not retried until the files change (their revision). A
run that fails to apply is retried with its own jittered exponential backoff; one the cluster
refused (``Rejected``) waits until its document changes.

``changed`` (paths) re-plans only what those files hold, before and after the change; a
template change re-plans everything. ``Watch`` drives ``reconcile_once`` from file events and
a periodic resync (``interval``, with jitter); its clock, its random source and its event
source are injected (``FileEvents`` wraps watchfiles), so tests need no sleeps.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .apply import ApplyResult, apply_plan
from .clusters.base import Cluster, ClusterError
from .collector import Collector, gc_paused
from .load import FileCache, Loaded, load_source, refresh
from .load.loaded import display_name
from .plan import Action, Plan, PlanError
from .reconcile import Source, make_plan, retrying
from .runspec.errors import ErrorType
from .runspec.normalize import without_own
from .state import Locked, SourceState, SourceStore, StateError

__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_MAX",
    "FileEvents",
    "Reason",
    "Reconciler",
    "State",
    "Watch",
]

BACKOFF_BASE = 2.0
BACKOFF_MAX = 300.0
JITTER = 0.1


class State(StrEnum):
    ready = "Ready"
    reconciling = "Reconciling"
    stalled = "Stalled"


class Reason(StrEnum):
    progressing = "Progressing"
    succeeded = "ReconciliationSucceeded"
    load_failed = "LoadFailed"
    validation_failed = "ValidationFailed"
    render_failed = "RenderFailed"
    plan_failed = "PlanFailed"
    observe_failed = "ObserveFailed"
    apply_failed = "ApplyFailed"
    prune_failed = "PruneFailed"
    locked = "Locked"


class _Terminal(Exception):
    """No retry can fix this; only a change to the files can."""

    def __init__(self, reason: Reason, message: str):
        super().__init__(message)
        self.reason = reason


class _Retry(Exception):
    def __init__(self, reason: Reason, message: str):
        super().__init__(message)
        self.reason = reason


@dataclass
class _Backoff:
    failures: int
    next_attempt: float
    document: str  # the hash of the document that failed: a new one is tried at once


def _digest(normalized: dict[str, Any]) -> str:
    """A normalised document's digest (``runspec.normalize.digest``; one of its JSON when it has
    no canonical form): a run's backoff holds until its document changes."""
    from .runspec.normalize import digest

    return digest(normalized) or hashlib.sha256(json.dumps(normalized, sort_keys=True).encode()).hexdigest()


class Reconciler:
    """One source's reconcile steps, with what the loop remembers between them."""

    def __init__(
        self,
        source: Source,
        cluster: Cluster,
        store: SourceStore,
        *,
        clock: Callable[[], float],
        who: str,
        cache: FileCache | None = None,
        rng: random.Random | None = None,
        commit: Callable[[], str | None] = lambda: None,
    ):
        self.source = source
        self.cluster = retrying(cluster)
        self.store = store
        self.clock = clock
        self.who = who
        self.cache = cache
        self.rng = rng or random.Random()
        self.commit = commit
        self.loaded: Loaded | None = None
        self.backoff: dict[str, _Backoff] = {}
        self.stalled_revision: str | None = None
        self.observe_failures = 0
        self.retry_at: float | None = None  # when a failed whole reconcile is tried again
        self.last_plan: Plan | None = None
        self.last_result: ApplyResult | None = None
        self._state: SourceState | None = None  # the source's state as this pass read it
        self._written: dict[str, Any] | None = None  # the status last written (or read)

    # ---- status ------------------------------------------------------------------------------

    def _status(self, state: State, reason: Reason, message: str = "", step: str = "") -> dict[str, Any]:
        """Write the source's status; not when it is the one written last but for ``updated_at``."""
        revision = self.loaded.revision if self.loaded is not None else None
        previous = self._written if self._written is not None else self._read().status
        status = {
            "state": state.value,
            "reason": reason.value,
            "message": message,
            "step": step,
            "revision": revision,
            "observed_revision": revision if state is State.ready else previous.get("observed_revision"),
            "updated_at": self.clock(),
        }
        if {**previous, "updated_at": None} != {**status, "updated_at": None}:
            self.store.set_status(self.source.name, status)
            self._written = status
        else:
            status = previous
        return status

    def _read(self) -> SourceState:
        """The source's state, read once a pass (its inventory and the status last written)."""
        if self._state is None:
            self._state = self.store.read(self.source.name)
            self._written = dict(self._state.status)
        return self._state

    # ---- the steps ---------------------------------------------------------------------------

    def reconcile_once(self, changed: Collection[str] | None = None, names: Collection[str] = ()) -> dict:
        """One pass of the steps; returns the status written. ``names``: runs due for a retry.

        The source's state is read once a pass (``_read``: the inventory the scope, the plan
        and the check for nothing to do use, and the status), and the status is written at each
        step boundary only when it changed."""
        status: dict[str, Any] | None = None
        step = "load"
        self._state = None
        try:
            previous = self.loaded
            self._load(changed)
            assert self.loaded is not None
            if self.stalled_revision is not None and self.loaded.revision == self.stalled_revision:
                status = self._written if self._written is not None else self._read().status
                return status  # not retried until the files change
            self._read()
            self._status(State.reconciling, Reason.progressing, step=step)
            self._check_loaded()
            step = "plan"
            self._status(State.reconciling, Reason.progressing, step=step)
            scope = self._scope(changed, names, previous)
            plan = self._plan(scope)
            self.last_plan = plan
            step = "apply"
            self._status(State.reconciling, Reason.progressing, step=step)
            result = self._apply(plan)
            self.last_result = result
            failed = result.failed()
            if failed:
                deletes = [e for e in failed if e.action == Action.delete.value]
                reason = Reason.prune_failed if len(deletes) == len(failed) else Reason.apply_failed
                words = "; ".join(f"{e.address}: {e.message}" for e in failed[:3])
                raise _Retry(reason, f"{len(failed)} of {len(result.entries)} runs failed: {words}")
            self.stalled_revision = None
            self.observe_failures = 0
            self.retry_at = None
            status = self._status(State.ready, Reason.succeeded, _summary(plan))
        except _Terminal as exc:
            self.stalled_revision = self.loaded.revision if self.loaded is not None else None
            status = self._status(State.stalled, exc.reason, str(exc), step)
        except _Retry as exc:
            status = self._status(State.reconciling, exc.reason, str(exc), step)
        except Locked as exc:
            self._later()
            status = self._status(State.reconciling, Reason.locked, str(exc), step)
        except (ClusterError, StateError) as exc:
            self._later()
            status = self._status(State.reconciling, Reason.observe_failed, str(exc), step)
        finally:
            if status is None:  # something unexpected: say so, and let it rise
                self._status(State.reconciling, Reason.progressing, "interrupted", step)
        return status

    def _later(self) -> None:
        self.observe_failures += 1
        self.retry_at = self.clock() + self._delay(self.observe_failures)

    def _load(self, changed: Collection[str] | None) -> None:
        s = self.source
        if self.loaded is None or changed is None:
            self.loaded = load_source(s.paths, template=s.template, sets=s.sets, cache=self.cache)
        else:
            self.loaded = refresh(self.loaded, changed, self.cache)

    def _check_loaded(self) -> None:
        assert self.loaded is not None
        errors = self.loaded.errors
        if not errors:
            return
        text = f"{len(errors)} problems; the first: {errors[0].format()}"
        if any(e.type in (ErrorType.syntax, ErrorType.file) for e in errors):
            raise _Terminal(Reason.load_failed, text)
        if any(e.path.steps[:1] == ("template",) or "template" in e.message for e in errors):
            raise _Terminal(Reason.render_failed, text)
        raise _Terminal(Reason.validation_failed, text)

    def _scope(self, changed: Collection[str] | None, names: Collection[str], previous: Loaded | None):
        """The runs this pass may touch: those of the changed files, or all; minus runs backing off."""
        assert self.loaded is not None
        if changed is None or previous is None or self.loaded.templates != previous.templates:
            scope = None
        else:
            files = {f for f in (_name_in(c, self.loaded) for c in changed) if f is not None}
            scope = self.loaded.names_in(files) | previous.names_in(files)
            inventory = self._read().inventory
            scope |= {n for n, e in inventory.items() if e.file in files}
        if names:
            scope = (scope or set()) | set(names)
        now = self.clock()
        waiting = set()
        for name, b in list(self.backoff.items()):
            want = self.loaded.runs.get(name)
            if want is not None and (want.digest or _digest(want.after())) != b.document:
                del self.backoff[name]  # its document changed: try it now
            elif b.next_attempt > now and name not in names:
                waiting.add(name)
        if not waiting:
            return scope
        everything = set(self.loaded.runs) | set(self._read().inventory)
        return (everything if scope is None else set(scope)) - waiting

    def _plan(self, scope: Collection[str] | None) -> Plan:
        assert self.loaded is not None
        try:
            return make_plan(
                self.source,
                self.loaded,
                self.cluster,
                self.store,
                self.clock(),
                scope=scope,
                inventory=self._read().inventory,
            )
        except PlanError as exc:
            raise _Terminal(Reason.plan_failed, str(exc)) from exc

    def _apply(self, plan: Plan) -> ApplyResult:
        if not plan.has_changes and all(c.action is Action.noop for c in plan.changes):
            inventory = self._read().inventory
            if all(
                c.after is None or (c.address in inventory and inventory[c.address].records(c.after, c.file))
                for c in plan.changes
            ):
                return ApplyResult(plan.source)
        result = apply_plan(
            plan,
            self.cluster,
            self.store,
            now=self.clock,
            who=self.who,
            commit=self.commit(),
            keep_going=True,
        )
        changes = {c.address: c for c in plan.changes}
        for entry in result.entries:
            if entry.outcome == "failed":
                change = changes[entry.address]
                held = self.backoff.get(entry.address)
                failures = (held.failures if held else 0) + 1
                terminal = "Rejected" in entry.message or entry.message.startswith("422")
                wait = math.inf if terminal else self._delay(failures)
                document = _digest(without_own(change.after)) if change.after is not None else ""
                self.backoff[entry.address] = _Backoff(failures, self.clock() + wait, document)
            else:
                self.backoff.pop(entry.address, None)
        return result

    def _delay(self, failures: int) -> float:
        base = min(BACKOFF_MAX, BACKOFF_BASE * 2 ** (failures - 1))
        return base * (1 + JITTER * (2 * self.rng.random() - 1))

    def due(self) -> list[str]:
        """Runs whose backoff has passed."""
        now = self.clock()
        return sorted(n for n, b in self.backoff.items() if b.next_attempt <= now)

    def next_due(self) -> float | None:
        """When the next retry is due (a run's backoff, or a failed reconcile's)."""
        times = [b.next_attempt for b in self.backoff.values() if b.next_attempt != math.inf]
        if self.retry_at is not None:
            times.append(self.retry_at)
        return min(times) if times else None


def _name_in(changed: str, loaded: Loaded) -> str | None:
    return display_name(changed, loaded)


def _summary(plan: Plan) -> str:
    s = plan.summary
    return (
        f"applied: {s['create']} created, {s['update']} updated, {s['replace']} replaced, "
        f"{s['delete']} deleted, {s['noop']} unchanged"
    )


# ---- the loop -----------------------------------------------------------------------------------

#: An event source: wait up to ``timeout`` seconds; the paths that changed (empty: none), or
#: ``None`` to stop.
Events = Callable[[float], "set[str] | None"]


class Watch:
    """Drive a ``Reconciler`` from file events and a periodic, jittered resync."""

    def __init__(
        self,
        reconciler: Reconciler,
        events: Events,
        *,
        interval: float = 300.0,
        clock: Callable[[], float],
        rng: random.Random | None = None,
        on_status: Callable[[dict], None] | None = None,
    ):
        self.reconciler = reconciler
        self.events = events
        self.interval = interval
        self.clock = clock
        self.rng = rng or random.Random()
        self.on_status = on_status
        self.next_resync = clock()  # the first pass is a full one, at once
        self._collector = Collector()  # ``run``'s: what a full pass left alive is frozen

    def _jittered(self) -> float:
        return self.interval * (1 + JITTER * (2 * self.rng.random() - 1))

    def step(self) -> bool:
        """Wait for the next thing to do and do it; ``False`` when the event source has stopped."""
        now = self.clock()
        wake = self.next_resync
        due = self.reconciler.next_due()
        if due is not None:
            wake = min(wake, due)
        changed = self.events(max(0.0, wake - now))
        if changed is None:
            return False
        now = self.clock()
        if changed:
            status = self.reconciler.reconcile_once(changed)
        elif now >= self.next_resync:
            status = self.reconciler.reconcile_once(None)
            self.next_resync = self.clock() + self._jittered()
            # what the pass left alive (the loaded documents, the source's state) lives on: the
            # cyclic collector stops walking it at every later pass, once what was garbage is
            # collected (frozen objects are still freed when nothing refers to them)
            self._collector.settle()
        elif self.reconciler.retry_at is not None and now >= self.reconciler.retry_at:
            status = self.reconciler.reconcile_once(None)
        elif self.reconciler.due():
            status = self.reconciler.reconcile_once(set(), names=self.reconciler.due())
        else:
            return True
        if self.on_status:
            self.on_status(status)
        return True

    def run(self) -> None:
        """Step until the events end (a test's scripted events, or a stop)."""
        with gc_paused(pause=False) as self._collector:  # unfrozen when the loop ends
            running = True
            while running:
                running = self.step()


class FileEvents:
    """watchfiles on the paths (and the template folders): ``events(timeout)`` for ``Watch``."""

    def __init__(self, paths: Collection[str], stop: Callable[[], bool] = lambda: False):
        import watchfiles

        from .templates import search_folders

        roots = [p for p in paths] + [str(f) for f in search_folders() if f.is_dir()]
        self._stop = stop
        self._iter: Iterator[set[tuple[Any, str]]] = iter(
            watchfiles.watch(
                *roots, yield_on_timeout=True, rust_timeout=200, debounce=50, raise_interrupt=False
            )
        )

    def __call__(self, timeout: float) -> set[str] | None:
        import time

        deadline = time.monotonic() + timeout
        while not self._stop():
            try:
                changes = next(self._iter)
            except StopIteration:
                return None
            found = {path for _, path in changes if not _ignored(path)}
            if found or time.monotonic() >= deadline:
                return found
        return None


def _ignored(path: str) -> bool:
    parts = path.replace("\\", "/").split("/")
    return any(p.startswith(".") for p in parts if p not in (".", ".."))
