"""Which source a run belongs to: one source each, the one whose inventory holds it.

A run is applied by one source. A plan of source Y that would take a run another source X
applied (a run on the cluster, named by Y's files, in X's inventory and not in Y's) is refused
before anything is applied (``OwnedElsewhere``: ``shared-run is applied by source src-x: remove
it there, or astra source adopt shared-run --source src-y``); a prune of Y deletes only what Y
still owns alone (a run X's inventory holds too, as an older astra could leave it, is kept and
listed as not pruned). Moving a run from one source to another is said on purpose, once:
``adopt`` (``astra source adopt RUN... --source Y``), which moves its inventory entry.

Why a command and not an apply option (Terraform's ``state mv`` rather than Argo CD's
``FailOnSharedResource=false``): an option kept in a CI job or a watch's flags would take every
run any source shares, at every pass, silently; a command takes the runs it names, once, and the
two sources' inventories say so at once (the next plan of X no longer names them as its own).

``held_elsewhere(plan, live, store)`` is the check ``reconcile.make_plan`` makes: it costs
nothing unless the plan holds a run on the cluster that is not in the source's inventory, or a
delete; then the store's sources are read once. Must not touch: the cluster, the plan's rules
(``reconciler.plan``: it only removes deletes and refuses).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace

from .plan import Action, Plan, PlanError
from .runs import LiveRun, RunSummary
from .state import InventoryEntry, SourceStore

__all__ = ["OwnedElsewhere", "adopt", "held_elsewhere", "owners_of"]

#: The annotation apply stamps on every run it writes: the source's name (``apply.stamped``).
MADE_BY = "astra.source"
#: How many runs an ``OwnedElsewhere`` message names (the rest are counted).
NAMED = 5


class OwnedElsewhere(PlanError):
    """The plan would take runs another source applied: ``owners`` (run → that source)."""

    def __init__(self, source: str, owners: Mapping[str, str]):
        self.owners = dict(owners)
        names = sorted(self.owners)
        said = "; ".join(
            f"{n} is applied by source {self.owners[n]}: remove it there, "
            f"or astra source adopt {n} --source {source}"
            for n in names[:NAMED]
        )
        more = f"; and {len(names) - NAMED} more runs applied by other sources" if len(names) > NAMED else ""
        super().__init__(said + more)


def owners_of(store: SourceStore, runs: Collection[str], *, but: str) -> dict[str, str]:
    """Which other source (not ``but``) holds each of ``runs`` in its inventory (those that none
    holds are left out)."""
    wanted = set(runs)
    found: dict[str, str] = {}
    for state in store.sources():
        if state.name == but:
            continue
        for name in wanted & state.inventory.keys():
            found.setdefault(name, state.name)
    return found


def held_elsewhere(
    plan: Plan, live: Mapping[str, LiveRun | RunSummary], inventory: Collection[str], store: SourceStore
) -> Plan:
    """``plan`` as its source may apply it: ``OwnedElsewhere`` when it takes a run another source
    holds; its deletes of runs another source holds too, dropped and listed as not pruned (a
    delete is looked into only when the run's ``astra.source`` annotation names another source:
    a prune of 10,000 runs of its own reads nothing more)."""
    taken = [c.address for c in plan.changes if c.address in live and c.address not in inventory]
    deletes = [
        c.address
        for c in plan.changes
        if c.action is Action.delete and _made_by(live.get(c.address)) not in (None, plan.source)
    ]
    if not taken and not deletes:
        return plan
    owners = owners_of(store, [*taken, *deletes], but=plan.source)
    refused = {n: owners[n] for n in taken if n in owners}
    if refused:
        raise OwnedElsewhere(plan.source, refused)
    shared = {n for n in deletes if n in owners}
    if not shared:
        return plan
    return replace(
        plan,
        changes=tuple(c for c in plan.changes if c.address not in shared),
        not_pruned=tuple(sorted({*plan.not_pruned, *shared})),
    )


def _made_by(run: LiveRun | RunSummary | None) -> str | None:
    """The source whose apply last wrote ``run`` (its ``astra.source`` annotation), if it says."""
    if not isinstance(run, LiveRun):
        return None
    found = ((run.document.get("metadata") or {}).get("annotations") or {}).get(MADE_BY)
    return found if isinstance(found, str) else None


def adopt(store: SourceStore, runs: Collection[str], into: str, *, who: str, now: float) -> dict[str, str]:
    """Move each of ``runs`` from the source whose inventory holds it into source ``into``'s (its
    last-applied spec and file kept), holding both sources' apply locks (``Locked`` while an
    apply holds one): run → the source it came from. ``PlanError`` naming the runs no other
    source holds (nothing is moved then)."""
    owners = owners_of(store, runs, but=into)
    missing = sorted(set(runs) - owners.keys())
    if missing:
        raise PlanError(
            f"no other source applied {', '.join(missing)}: nothing to adopt "
            "(astra source list shows what each holds)"
        )
    held: list[tuple[str, str]] = []
    try:
        for name in sorted({into, *owners.values()}):
            held.append((name, store.lock(name, who, now).id))
        for owner in sorted(set(owners.values())):
            mine = [n for n, o in owners.items() if o == owner]
            entries: Mapping[str, InventoryEntry] = store.inventory(owner, mine)
            for name in sorted(mine):
                store.record(into, name, entries[name])  # first kept by the new source: never by none
                store.record(owner, name, None)
    finally:
        for name, lock_id in reversed(held):
            store.unlock(name, lock_id)
    return owners
