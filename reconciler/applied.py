"""What an apply says of itself in its source's status: the same words for ``astra apply`` and
for a pass of ``astra watch`` (``reconciler.loop``).

* ``summary(plan)``: ``applied: 1 created (a), 0 updated, 1 replaced (b), 0 deleted, 3
  unchanged``: the runs of each change named (at most ``NAMES_SAID`` of each);
* ``ready_status(plan, now)``: the status a successful apply leaves (``Ready``,
  ``ReconciliationSucceeded``, the revision applied), so that ``astra status`` right after an
  ``astra apply`` says so instead of ``Unknown``; with ``held``, the replaces the plan holds
  until their runs end (``held_status``: each ``{run, message}``).

Pure: ``now`` comes in. Must not touch: the store (the caller writes), the plan's making.
"""

from __future__ import annotations

from typing import Any

from .plan import Plan

__all__ = ["NAMES_SAID", "held_status", "ready_status", "summary"]

#: How many runs of each change an applied status names.
NAMES_SAID = 10


def summary(plan: Plan) -> str:
    s = plan.summary
    named: dict[str, list[str]] = {}
    for c in plan.changes:
        named.setdefault(c.action.value, []).append(c.address)

    def said(action: str, word: str) -> str:
        names = sorted(named.get(action, []))
        more = len(names) - NAMES_SAID
        shown = ", ".join(names[:NAMES_SAID]) + (f", … {more} more" if more > 0 else "")
        return f"{s[action]} {word}" + (f" ({shown})" if names else "")

    parts = [said("create", "created"), said("update", "updated"), said("replace", "replaced")]
    said_all = f"applied: {', '.join(parts)}, {said('delete', 'deleted')}, {s['noop']} unchanged"
    if plan.held:
        names = sorted(c.address for c in plan.held)
        word = "replace" if len(names) == 1 else "replaces"
        said_all += f"; {len(names)} {word} held until the run ends ({', '.join(names[:NAMES_SAID])})"
    return said_all


def held_status(plan: Plan | None) -> list[dict[str, str]]:
    """The replaces ``plan`` holds, as a source's status lists them (``run``, ``message``)."""
    if plan is None:
        return []
    return [{"run": c.address, "message": c.reason} for c in sorted(plan.held, key=lambda c: c.address)]


def ready_status(plan: Plan, now: float) -> dict[str, Any]:
    """The status a successful apply of ``plan`` leaves (the loop's fields and words)."""
    revision = (plan.revision or {}).get("id")
    return {
        "state": "Ready",
        "reason": "ReconciliationSucceeded",
        "message": summary(plan),
        "step": "",
        "revision": revision,
        "observed_revision": revision,
        "updated_at": now,
        **({"held": held_status(plan)} if plan.held else {}),
    }
