"""``--replace RUN`` (Terraform's ``-replace``): a run the files hold unchanged is planned as a
replace, so that a team reruns it from CI with the plan reviewed.

``force_replace(plan, names, desired)`` is the caller that knows more (STYLE: only such a caller
turns a change into a replace): a ``noop`` or ``update`` of each named run becomes a ``replace``
with the reason ``replaced as asked (--replace)``; a run that is created anyway stays a create. A
name the files do not hold, or whose run the plan deletes, is a ``PlanError`` (nothing planned).

Pure: no I/O, no clock. Must not touch: how the plan was made (``build``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from typing import Any

from ..runs import PlanError
from .model import Action, Cost, Plan

__all__ = ["REASON_ASKED", "force_replace"]

REASON_ASKED = "replaced as asked (--replace)"


def force_replace(
    plan: Plan,
    names: Collection[str],
    after_of: Callable[[str], dict[str, Any] | None],
    cost_of: Callable[[str], Cost | None] = lambda name: None,
) -> Plan:
    """``plan`` with each of ``names`` replaced (see the module docstring). ``after_of(name)``:
    the files' normalised document of a run (``None``: the files hold no such run), for a noop
    that carries none (its digests agreed: ``build._unchanged``); ``cost_of(name)``: what
    replacing it stops (``plan.cost_of`` of the live run), for a change that says none."""
    if not names:
        return plan
    by_name = {c.address: c for c in plan.changes}
    wanted = set(names)
    for name in sorted(wanted):
        change = by_name.get(name)
        if change is None or after_of(name) is None:
            raise PlanError(f"--replace {name}: the files hold no run {name}")
        if change.action is Action.delete:
            raise PlanError(f"--replace {name}: the plan deletes run {name}")
    changes = []
    for c in plan.changes:
        if c.address in wanted and c.action in (Action.noop, Action.update):
            after = c.after if c.after is not None else after_of(c.address)
            before = c.before if c.before is not None else after
            cost = c.cost if c.cost is not None else cost_of(c.address)
            c = dataclasses.replace(
                c, action=Action.replace, before=before, after=after, reason=REASON_ASKED, cost=cost
            )
        changes.append(c)
    return dataclasses.replace(plan, changes=tuple(changes))
