"""Building a plan: desired runs, live runs and the source's inventory in, a ``Plan`` out.

``build_plan`` decides one ``Change`` per run the source is concerned with: every desired run,
and every run of its inventory (what it applied before). Runs on the cluster that are neither
are someone else's and never appear. The rules:

* desired, not live: **create** (if the inventory has it, it was deleted out of band: planned back);
* desired and live: the three-way diff (``diff.compare``); no field changes → **noop** (a
  finished run whose spec is unchanged stays, whatever state it ended in); otherwise **update**
  when every changed field can change in place, **replace** when one forces it; a finished run
  whose change forces a replace is rerun (the change says ``reruns``), and one whose changes
  are all in place (``max_parallel``, ``priority``, labels) is updated and not rerun;
* in the inventory, not desired: **delete** only with ``prune`` (otherwise listed in
  ``not_pruned``); when it is gone from the cluster too, its entry is ``forget``-ed (with prune);
* ``prune`` that would delete every run of the source while the files name none raises
  ``PlanError`` unless ``allow_empty``.

``scope`` (a set of names) limits the plan to those runs: the watch loop re-plans only what a
changed file holds. The callers guarantee the desired set loaded without error: a failed load
is never an empty desired set. Pure: no I/O; ``now`` is passed in.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from ..runs import DesiredItem, LiveRun, RunSummary, WorkerInfo
from .cost import cost_of
from .diff import compare
from .model import Action, Change, Plan, PlanError, action_for, quick_noop
from .normalize import normalize

__all__ = ["Applied", "DesiredItem", "build_plan", "in_scope", "stopping"]

REASON_PLANNED_BACK = "deleted since its last apply: planned back"
REASON_RERUNS = "reruns"
REASON_FINISHED_IN_PLACE = "finished: updated in place, not rerun"
REASON_ADOPT = "on the cluster but not in this source's inventory: astra takes it over"
REASON_PRUNE = "no longer in the files (--prune)"
REASON_DRIFT = "changed outside astra: set back to the files"


class Applied(Protocol):
    """An inventory entry as the plan needs it: the last-applied document and its file (``spec``
    may be ``None`` for a run the plan finds unchanged by digest: it is not read)."""

    @property
    def spec(self) -> dict[str, Any] | None: ...

    @property
    def file(self) -> str | None: ...

    def records(self, after: dict[str, Any], file: str | None) -> bool:
        """Whether the entry records exactly the normalised document ``after``, from ``file``."""


def in_scope(desired: Collection[str], inventory: Collection[str], scope: Collection[str] | None) -> set[str]:
    """The runs a plan is about: those desired or in the inventory, within ``scope`` (a watch's
    pass: the runs of the changed files, looked up one by one rather than every run gathered)."""
    if scope is None:
        return set(desired) | set(inventory)
    return {n for n in scope if n in desired or n in inventory}


def stopping(
    desired: Mapping[str, DesiredItem],
    live: Mapping[str, LiveRun | RunSummary],
    inventory: Mapping[str, Applied],
    *,
    prune: bool = False,
    scope: Collection[str] | None = None,
) -> list[str]:
    """The runs a plan might stop (replace or delete) and that are not finished: whose workers to fetch."""
    names = []
    for name, run in live.items():
        if run.final or (scope is not None and name not in scope):
            continue
        if name in desired or (prune and name in inventory):
            names.append(name)
    return sorted(names)


def build_plan(
    *,
    source: str,
    cluster: str,
    desired: Mapping[str, DesiredItem],
    live: Mapping[str, LiveRun | RunSummary],
    inventory: Mapping[str, Applied],
    now: float,
    prune: bool = False,
    allow_empty: bool = False,
    files: Mapping[str, str] | None = None,
    workers: Mapping[str, Sequence[WorkerInfo]] | None = None,
    scope: Collection[str] | None = None,
    unchanged: Collection[str] = (),
) -> Plan:
    """The plan for one source; see the module docstring.

    ``unchanged``: runs whose desired, last-applied and live documents have one digest
    (``reconciler.runspec.normalize.digest``): each is a noop without ``compare``, its live document
    is not needed (``live`` may hold its ``RunSummary``), and ``before`` is ``after``.

    Over 60 lines with its parameters, one a line, and this docstring: its body is the plan's one pass
    over the runs.
    """
    workers = workers or {}
    unchanged = unchanged if isinstance(unchanged, set | frozenset | dict) else set(unchanged)
    if scope is None:  # the desired runs in their order (a load's: sorted), so sorting is one pass
        names = sorted([*desired, *(n for n in inventory if n not in desired)])
    else:
        names = sorted(in_scope(desired, inventory, scope))
    changes: list[Change] = []
    not_pruned: list[str] = []
    forget: list[str] = []
    for name in names:
        want, have, applied = desired.get(name), live.get(name), inventory.get(name)
        if want is not None:
            if have is not None and applied is not None and name in unchanged:
                changes.append(_unchanged(want, have, applied))
            else:
                changes.append(_for_desired(want, _full(have), applied, workers.get(name), now))
        elif have is None:
            if prune:
                forget.append(name)
        elif prune:
            have = _full_run(have)
            before = normalize(have.document)
            changes.append(
                Change(
                    address=name,
                    action=action_for(before, None),
                    before=before,
                    after=None,
                    reason=REASON_PRUNE,
                    cost=cost_of(have, workers.get(name), now),
                    file=applied.file if applied is not None else None,
                    resource_version=have.resource_version,
                )
            )
        else:
            not_pruned.append(name)
    deletes = [c for c in changes if c.action is Action.delete]
    if deletes and not desired and not allow_empty:
        raise PlanError(
            f"this would delete every run of source '{source}' ({len(deletes)}) and the files name none: "
            "if that is what you want, add --allow-empty"
        )
    return Plan(
        source=source,
        cluster=cluster,
        created_at=now,
        changes=tuple(changes),
        files=dict(files or {}),
        live={n: (live[n].resource_version if n in live else None) for n in names},
        prune=prune,
        not_pruned=tuple(not_pruned),
        forget=tuple(forget),
    )


def _full(have: LiveRun | RunSummary | None) -> LiveRun | None:
    """``have``, which must be a ``LiveRun`` or nothing (see ``_full_run``)."""
    return None if have is None else _full_run(have)


def _full_run(have: LiveRun | RunSummary) -> LiveRun:
    """The live run with its document: a run the plan compares or deletes must come in full (only
    an unchanged or an unpruned one may come as its summary)."""
    if isinstance(have, RunSummary):
        raise PlanError(f"the live run {have.name} came without its document: it cannot be compared")
    return have


def _unchanged(want: DesiredItem, have: LiveRun | RunSummary, applied: Applied) -> Change:
    """The noop ``_for_desired`` gives when the three digests are one: equal canonical JSON, so
    ``compare`` finds no field change and its ``before`` (live through the managed fields: all of
    them, as live has exactly the desired fields) equals ``after``. When the inventory names the
    same file too, apply has nothing to send or record: the noop carries no documents (its
    ``before`` and ``after`` are ``None``), and the run's document is never read."""
    after = None if applied.file == want.file else want.after()
    reason = f"finished ({have.state}) and unchanged: it stays" if have.final else ""
    return quick_noop(want.name, want.file, have.resource_version, reason, after)


def _for_desired(
    want: DesiredItem,
    have: LiveRun | None,
    applied: Applied | None,
    workers: Sequence[WorkerInfo] | None,
    now: float,
) -> Change:
    """One desired run's three-way comparison: new, updated, replaced, noop, with the reason of
    each (over 60 lines: the cases share the documents normalized once and compared once; most
    of its length is the ``Change`` each case answers, field by field)."""
    after = want.after()
    if have is None:
        return Change(
            address=want.name,
            action=action_for(None, after),
            before=None,
            after=after,
            reason=REASON_PLANNED_BACK if applied is not None else "",
            file=want.file,
        )
    if applied is not None and applied.spec is None:
        raise PlanError(f"the inventory entry of {want.name} came without its spec: it cannot be compared")
    last = normalize(applied.spec) if applied is not None else None
    before, fields = compare(after, normalize(have.document), last)
    # no field changes is exactly a noop (compare's contract): spare the second deep comparison
    action = action_for(before, after) if fields else Action.noop
    reason = ""
    cost = None
    if action is Action.update:
        spec_changed = any(f.path == "spec" or f.path.startswith(("spec.", "spec[")) for f in fields)
        if any(f.forces_replace for f in fields):
            action = Action.replace
            if have.final and spec_changed:
                reason = REASON_RERUNS
        elif have.final:
            reason = REASON_FINISHED_IN_PLACE
        if action is Action.replace:
            cost = cost_of(have, workers, now)
        if not reason and applied is None:
            reason = REASON_ADOPT
        elif not reason and all(f.drift for f in fields):
            reason = REASON_DRIFT
    elif action is Action.noop:
        if have.final:
            reason = f"finished ({have.state}) and unchanged: it stays"
        if applied is not None and applied.records(after, want.file):
            # nothing to send or record: as ``_unchanged`` gives it
            return Change(
                address=want.name,
                action=action,
                before=None,
                after=None,
                reason=reason,
                file=want.file,
                resource_version=have.resource_version,
            )
    return Change(
        address=want.name,
        action=action,
        before=before,
        after=after,
        fields=tuple(fields),
        reason=reason,
        cost=cost,
        file=want.file,
        resource_version=have.resource_version,
    )
