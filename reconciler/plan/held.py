"""Held replaces: a change that would stop a run holding workers waits for the run to end.

``hold_replaces(plan, exempt)`` is the caller that knows more (STYLE: only such a caller turns
one action into another): each ``replace`` of a run that holds workers (its ``cost`` says so:
not finished, at least one worker busy) whose document's replace policy is ``WhenFinished``
(``runspec.lifecycle.replace_policy``: ``spec.replace``, else by lifetime) and that is not in
``exempt`` (``--replace RUN``) leaves the plan's changes for ``Plan.held``, with the words
``gf-train is Running (3h12m, 16 GPUs); it will be replaced when it ends`` as its reason. In the
changes the run stays as a noop that carries no documents: apply sends and records nothing, so
the source's last-applied spec is still the old one and the next plan finds the change again;
once the run has ended it is a replace of a finished run (``reruns``), carried out as any other.

Updates in place are never held (they stop nothing); a replace of a run that holds no worker
(Pending, or finished) is not held (it stops nothing either). Pure: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from ..runspec.lifecycle import REPLACE_WHEN_FINISHED, held_words, replace_policy
from ..runspec.vocabulary import FINAL_RUN_STATES
from .model import Action, Change, Plan, quick_noop

__all__ = ["hold_replaces", "holds"]


def holds(change: Change) -> bool:
    """Whether ``change`` is a replace to hold (see the module docstring)."""
    if change.action is not Action.replace or change.cost is None:
        return False
    cost = change.cost
    if cost.state in FINAL_RUN_STATES or cost.workers <= 0:
        return False
    spec = (change.after or {}).get("spec")
    return replace_policy(spec) == REPLACE_WHEN_FINISHED


def hold_replaces(plan: Plan, exempt: Collection[str] = ()) -> Plan:
    """``plan`` with the replaces to hold moved to ``Plan.held`` (see the module docstring)."""
    changes: list[Change] = []
    held: list[Change] = []
    for c in plan.changes:
        if c.address in exempt or not holds(c):
            changes.append(c)
            continue
        assert c.cost is not None
        words = held_words(c.address, c.cost.state, c.cost.ran_seconds_max, c.cost.gpus)
        held.append(dataclasses.replace(c, reason=words))
        changes.append(quick_noop(c.address, c.file, c.resource_version, "", None))
    if not held:
        return plan
    return dataclasses.replace(plan, changes=tuple(changes), held=(*plan.held, *held))
