"""One source's reconcile steps (``Reconciler``): keep the cluster equal to the files, in named steps.

``Reconciler.reconcile_once(changed=None)`` runs the fixed steps **load → validate → render →
plan → apply → prune** for one source (load, validate and render are one pass of
``reconciler.load``; their failures get their own reasons). The source's state is read once a
pass, after the pass's first status write (its inventory for the scope, the plan and the
nothing-to-do check; the apply reads it again under the lock). With the control plane's store,
neither read is a call when the answer to this process's last write (the status; the lock)
says nobody else wrote since: the state it keeps is the server's. The status is written when
a pass starts (``Reconciling``, step ``load``), at each later step boundary when the pass has
run for ``PROGRESS_EVERY`` seconds since the last write (a quick pass, such as a watch's one
changed file, writes twice: not four times), at its end, and, whatever happens, in a
``finally``:

=============  =========================  ==========================================================
state          reason                     when
=============  =========================  ==========================================================
Reconciling    Progressing                a step is running (``step`` says which)
Ready          ReconciliationSucceeded    every step passed; ``observed_revision`` set to the files'
Reconciling    SourceFetchFailed          a remote could not be fetched: nothing planned or pruned;
                                          retried after a backoff
Stalled        LoadFailed                 a file cannot be read or parsed          (terminal)
Stalled        ValidationFailed           a run spec is invalid, or names clash    (terminal)
Stalled        RenderFailed               a template failed                        (terminal)
Stalled        PlanFailed                 the plan was refused (``--allow-empty``) (terminal)
Reconciling    ObserveFailed              the cluster could not be read: retried after a backoff
Reconciling    ApplyFailed                some runs failed to apply: each retried after its backoff
Reconciling    PruneFailed                some runs failed to delete: each retried after its backoff
Reconciling    Locked                     another apply holds the lock: retried after a backoff
Reconciling    StalePlan                  the cluster changed outside astra between a plan made
                                          under the lock and its apply: retried after a backoff
=============  =========================  ==========================================================

**A plan gone stale** (``StalePlan``: another apply of the same source, such as a second
``astra watch`` loop, changed it between this pass's plan and its apply) never ends the loop: the
pass takes the source's lock, plans again from what the other apply left, and applies that
(``_plan_again``); if the lock is held by then, the pass says ``Locked`` and is retried.

**Held replaces.** A Ready status lists the replaces its plan holds until their runs end
(``held``: each ``{run, message}``; another state carries the last Ready's list); a pass that
carries out one that the status it follows held lists it in ``replaced`` (run names). The
server's alerts tell each (``run.replace_held``, ``run.replaced``) once per source, run and
revision.

A terminal failure (``Stalled``) is not retried until the files change (their revision). A
run that fails to apply is retried with its own jittered exponential backoff; one the cluster
refused (``Rejected``) waits until its document changes.

``changed`` (paths) re-plans only what those files hold, before and after the change; a
template change re-plans everything.

**Revisions.** A source with an ``origin`` (a remote repository: ``RemoteOrigin``) is fetched
first at every full pass; its files are exactly the tree of the fetched commit, loaded again
only when the commit is another; a force-push (a tip that does not descend from the last) is
applied as the new tip and said in the history. A source read from folders has its working
tree's revision probed at each full pass. The status says the revision (``revision``:
``main@sha1:…``, or ``sha256:…`` of files in no repository).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
from collections.abc import Callable, Collection
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from ..applied import held_status, summary
from ..apply import ApplyResult, apply_plan
from ..clusters.base import Cluster, ClusterError
from ..collector import gc_paused
from ..git import Checkout, Probe, Remote, SourceError, SourceFetchFailed
from ..git.agesecrets import AgeSecretError
from ..load import FileCache, Loaded, load_source, refresh
from ..load.loaded import display_name
from ..plan import Action, Plan, PlanError
from ..reconcile import Source, StalePlan, make_plan, retrying, shown_as, with_revision
from ..runspec.errors import ErrorType
from ..runspec.normalize import without_own
from ..state import Lock, Locked, SourceState, SourceStore, StateError
from .declared import Declared, Planned, said

__all__ = ["BACKOFF_BASE", "BACKOFF_MAX", "JITTER", "Origin", "Reason", "Reconciler", "RemoteOrigin", "State"]

BACKOFF_BASE = 2.0
#: How many problems of broken files a status message says (``astra validate`` says them all).
PROBLEMS_SAID = 20

BACKOFF_MAX = 300.0
JITTER = 0.1
#: A step boundary's status (the step alone changed) is written once this many seconds passed
#: since the last write: what an observer of a slow pass sees move, at no cost to a quick one.
PROGRESS_EVERY = 1.0


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
    stale_plan = "StalePlan"
    source_fetch_failed = "SourceFetchFailed"


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


class Origin(Protocol):
    """Where a source's files come from, fetched at every full pass: ``fetch()`` gives the
    ``Checkout`` to load and a note for the history (a force-push), or raises ``SourceError``."""

    def fetch(self) -> tuple[Checkout, str]: ...


class RemoteOrigin:
    """A remote repository's ref, and the folder in it (``reconciler.git.Remote``)."""

    def __init__(self, remote: Remote, folder: str | None = None):
        self.remote, self.folder = remote, folder

    def fetch(self) -> tuple[Checkout, str]:
        fetched = self.remote.fetch()
        note = ""
        if fetched.forced and fetched.previous:
            note = (
                f"force-push: {fetched.revision.short} does not descend from {fetched.previous[:7]} "
                "(history rewritten): applied as the new tip"
            )
        return self.remote.checkout(fetched.revision, self.folder), note


def _digest(normalized: dict[str, Any]) -> str:
    """A normalised document's digest (``runspec.normalize.digest``; one of its JSON when it has
    no canonical form): a run's backoff holds until its document changes."""
    from ..runspec.normalize import digest

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
        origin: Origin | None = None,
        declared: Declared | None = None,
    ):
        self.source = source
        #: what astra.yaml declares beside the runs (secrets in age, alerts), applied at each
        #: apply (``loop.declared``)
        self.declared = declared
        self.cluster = retrying(cluster)
        self.store = store
        self.clock = clock
        self.who = who
        self.cache = cache
        self.rng = rng or random.Random()
        self.commit = commit
        self.origin = origin
        self.checkout: Checkout | None = None  # where the files were read, and their revision
        self.note = ""  # said in the next apply's history (a force-push)
        self.loaded: Loaded | None = None
        self.backoff: dict[str, _Backoff] = {}
        self.stalled_revision: str | None = None
        self.observe_failures = 0
        self.retry_at: float | None = None  # when a failed whole reconcile is tried again
        self.last_plan: Plan | None = None
        self.last_result: ApplyResult | None = None
        self._state: SourceState | None = None  # the source's state as this pass read it
        self._written: dict[str, Any] | None = None  # the status last written (or read)
        self._replaced: frozenset[str] = frozenset()  # the runs this pass replaced

    # ---- status ------------------------------------------------------------------------------

    def _status(self, state: State, reason: Reason, message: str = "", step: str = "") -> dict[str, Any]:
        """Write the source's status; not when it is the one written last but for ``updated_at``."""
        revision = self._revision_id()
        previous = self._written if self._written is not None else self._read().status
        if (
            state is State.reconciling
            and reason is Reason.progressing
            and not message
            and step not in ("", "load")
            and (previous.get("state"), previous.get("reason")) == (state.value, reason.value)
            and self.clock() - float(previous.get("updated_at") or 0) < PROGRESS_EVERY
        ):
            return previous  # a step boundary of a quick pass: said by the pass's next write
        status = {
            "state": state.value,
            "reason": reason.value,
            "message": message,
            "step": step,
            "revision": revision,
            "observed_revision": revision if state is State.ready else previous.get("observed_revision"),
            "updated_at": self.clock(),
        }
        held = held_status(self.last_plan) if state is State.ready else previous.get("held")
        was_held = {h.get("run") for h in previous.get("held") or ()}
        replaced = sorted(was_held & self._replaced)  # a held replace carried out by this pass
        if replaced:
            status["replaced"] = replaced
            held = [h for h in held or () if h.get("run") not in self._replaced]
        if held:
            status["held"] = held
        if {**previous, "updated_at": None} != {**status, "updated_at": None}:
            self.store.set_status(self.source.name, status)
            self._written = status
        else:
            status = previous
        return status

    def _revision_id(self) -> str | None:
        """The files' revision: the commit (``main@sha1:…``), else the hash of the files."""
        if self.checkout is not None and self.checkout.revision is not None:
            return self.checkout.revision.id
        return None if self.loaded is None else f"sha256:{self.loaded.revision}"

    def _begin(self, step: str) -> None:
        """A pass's first status, and the source's state: as the answer to that status write
        confirmed it, when the store keeps it so (``kept``: nobody else wrote since this
        store's last call), else read (one round trip less a pass)."""
        before = self._written
        self._status(State.reconciling, Reason.progressing, step=step)
        kept = getattr(self.store, "kept", None)
        if self._state is None and kept is not None and self._written is not before:
            self._state = kept(self.source.name)
        self._read()

    def _read(self) -> SourceState:
        """The source's state, read once a pass (its inventory and the status last written)."""
        if self._state is None:
            self._state = self.store.read(self.source.name)
            self._written = dict(self._state.status)
        return self._state

    # ---- the steps ---------------------------------------------------------------------------

    def reconcile_once(self, changed: Collection[str] | None = None, names: Collection[str] = ()) -> dict:
        """One pass of the steps; returns the status written. ``names``: runs due for a retry.
        A pass is a loop's unit of work: the cyclic collector is paused for it, as a command
        pauses it at its entry (``reconciler.collector``)."""
        with gc_paused():
            return self._pass(changed, names)

    def _pass(self, changed: Collection[str] | None, names: Collection[str]) -> dict:
        """``reconcile_once``'s steps (over 60 lines: one ``try`` whose every ``except`` is a
        status the loop writes; split, the step each failure happened in would be passed around).

        The source's state is read once a pass (``_read``: the inventory the scope, the plan
        and the check for nothing to do use, and the status), and the status is written at each
        step boundary only when it changed."""
        status: dict[str, Any] | None = None
        step = "load"
        self._state = None
        self._replaced = frozenset()
        try:
            previous = self.loaded
            self._load(changed)
            assert self.loaded is not None
            if self.stalled_revision is not None and self.loaded.revision == self.stalled_revision:
                status = self._written if self._written is not None else self._read().status
                return status  # not retried until the files change
            self._begin(step)
            self._check_loaded()
            step = "plan"
            self._status(State.reconciling, Reason.progressing, step=step)
            extra = self._declared_plan()
            scope = self._scope(changed, names, previous)
            plan = self._plan(scope, extra)
            self.last_plan = plan
            step = "apply"
            self._status(State.reconciling, Reason.progressing, step=step)
            if extra is not None and self.declared is not None:
                self.declared.apply(self.cluster, extra.resources, extra.values, extra.sealed)
            try:
                result = self._apply(plan)
            except StalePlan:  # another apply (a second loop) changed the source since the plan
                plan, result = self._plan_again(scope, extra)
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
            lines = said(extra.resources) if extra is not None else []
            status = self._status(State.ready, Reason.succeeded, "; ".join([summary(plan), *lines]))
        except _Terminal as exc:
            self.stalled_revision = self.loaded.revision if self.loaded is not None else None
            status = self._status(State.stalled, exc.reason, str(exc), step)
        except _Retry as exc:
            status = self._status(State.reconciling, exc.reason, str(exc), step)
        except Locked as exc:
            self._later()
            status = self._status(State.reconciling, Reason.locked, str(exc), step)
        except StalePlan as exc:  # stale again, under the lock: the cluster changed outside astra
            self._later()
            status = self._status(State.reconciling, Reason.stale_plan, str(exc), step)
        except SourceFetchFailed as exc:  # nothing was loaded, planned or pruned
            self._later()
            status = self._status(State.reconciling, Reason.source_fetch_failed, str(exc), "fetch")
        except AgeSecretError as exc:  # a secret's file does not decrypt: nothing applied, tried each pass
            # (also: the source declares secrets or alerts to a cluster that keeps none)
            self.stalled_revision = None
            status = self._status(State.stalled, Reason.load_failed, str(exc), step)
        except SourceError as exc:  # the commit cannot be read (no such folder in it): until it changes
            self.stalled_revision = None
            status = self._status(State.stalled, Reason.load_failed, str(exc), step)
        except (ClusterError, StateError) as exc:
            self._later()
            status = self._status(State.reconciling, Reason.observe_failed, str(exc), step)
        finally:
            if status is None:  # something unexpected: say so, and let it rise
                self._status(State.reconciling, Reason.progressing, "interrupted", step)
        return status

    def _declared_plan(self) -> Planned | None:
        """The source's secrets decrypted and its alerts, and what applying each would do
        (``loop.declared``); ``None`` when it declares none. An ``AgeSecretError`` stops the pass
        before any apply."""
        if self.declared is None or self.declared.empty:
            return None
        paths = self.checkout.paths if self.checkout is not None else self.source.paths
        return self.declared.plan(self.cluster, paths[0] if paths else ".")

    def _later(self) -> None:
        self.observe_failures += 1
        self.retry_at = self.clock() + self._delay(self.observe_failures)

    def _load(self, changed: Collection[str] | None) -> None:
        s = self.source
        if self.origin is not None:
            if changed is None:  # a full pass: fetch; the same commit keeps what was loaded
                checkout, note = self.origin.fetch()
                same = self.checkout is not None and self.checkout.revision == checkout.revision
                self.checkout, self.note = checkout, note or (self.note if same else "")
                if same and self.loaded is not None:
                    return
            if self.checkout is not None and (self.loaded is None or changed is None):
                loaded = load_source(self.checkout.paths, template=s.template, sets=s.sets, cache=self.cache)
                self.loaded = shown_as(loaded, self.checkout)
            return
        if self.loaded is None or changed is None:
            probe = Probe(s.paths) if s.probe else None
            self.loaded = load_source(s.paths, template=s.template, sets=s.sets, cache=self.cache)
            if probe is not None:
                revision, top = probe.result()
                self.checkout = Checkout(tuple(s.paths), tuple(s.paths), revision, top, top)
        else:
            self.loaded = refresh(self.loaded, changed, self.cache)

    def _check_loaded(self) -> None:
        assert self.loaded is not None
        errors = self.loaded.errors
        if not errors:
            return
        noun = "problem" if len(errors) == 1 else "problems"
        shown = "; ".join(e.format() for e in errors[:PROBLEMS_SAID])
        more = (
            f"; and {len(errors) - PROBLEMS_SAID} more (astra validate)"
            if len(errors) > PROBLEMS_SAID
            else ""
        )
        text = f"{len(errors)} {noun}: {shown}{more}"
        if any(e.type in (ErrorType.syntax, ErrorType.file) for e in errors):
            raise _Terminal(Reason.load_failed, text)
        # a template's fault: the run's template block, or a template file (or --set) it names;
        # a run spec's own problem (a missing task_template too) is a validation's
        runs_files = set(self.loaded.files)
        if any(e.path.steps[:1] == ("template",) or e.file not in runs_files for e in errors):
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

    def _plan(self, scope: Collection[str] | None, extra: Planned | None = None) -> Plan:
        assert self.loaded is not None
        try:
            made = make_plan(
                self.source,
                self.loaded,
                self.cluster,
                self.store,
                self.clock(),
                scope=scope,
                inventory=self._read().inventory,
            )
            made = with_revision(made, self.checkout, self.loaded)
            if extra is not None:
                made = dataclasses.replace(
                    made, resources=extra.resources, resources_not_pruned=extra.not_pruned
                )
            return made
        except PlanError as exc:
            raise _Terminal(Reason.plan_failed, str(exc)) from exc

    def _plan_again(self, scope: Collection[str] | None, extra: Planned | None) -> tuple[Plan, ApplyResult]:
        """Plan and apply again, holding the source's lock from before the plan (as ``astra
        apply`` does): what a loop does when another apply made its plan stale. ``Locked`` when
        another apply holds the lock now (the pass says so, and is retried after a backoff)."""
        lock = self.store.lock(self.source.name, self.who, self.clock())
        try:
            self._state = None  # the other apply changed the inventory: read it again
            plan = self._plan(scope, extra)
            self.last_plan = plan
            return plan, self._apply(plan, lock)
        finally:
            self.store.unlock(self.source.name, lock.id)

    def _apply(self, plan: Plan, lock: Lock | None = None) -> ApplyResult:
        if not plan.forget and all(c.action is Action.noop for c in plan.changes):  # runs alone:
            # the declared secrets and alerts are applied before (``declared.apply``)
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
            commit=self._commit(),
            keep_going=True,
            note=self.note,
            held=lock,
        )
        self.note = ""
        self._replaced = frozenset(e.address for e in result.entries if e.outcome == "replaced")
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

    def _commit(self) -> str | None:
        """The files' commit, for the history (``commit()``: a git process); not asked when the
        last full pass found the folders in no repository (one made since is seen at the next)."""
        if self.origin is None and self.checkout is not None and self.checkout.revision is None:
            return None
        return self.commit()

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
