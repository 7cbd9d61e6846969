"""Every run the plan would start that could never be placed, refused the same way.

The plan's own check (``plan.impossible_ask``: more GPUs than a machine, or the cluster, has)
and the cluster's dry run (``with_outlook``: ``would fail: memory_bytes 900Ti for each worker,
but the largest machine has 2Ti of memory``, a GPU model no machine has, a keep_within no group
can hold…) say the same thing: the run would be created only to fail. Both become one line
each, ``RUN: why``, which plan prints before exiting 1 and apply prints before refusing.

Must not touch: the plan (it only reads the changes' outlooks), the cluster.
"""

from __future__ import annotations

from typing import Any

__all__ = ["with_failed_outlooks"]


def with_failed_outlooks(made: Any, found: dict[str, str]) -> list[str]:
    """``RUN: why`` for the runs of ``found`` and for each change whose outlook says it would
    fail (the plan's own words first where both speak of one run), by run name."""
    said = dict(found)
    for c in made.changes:
        outlook = getattr(c, "outlook", None)
        if isinstance(outlook, dict) and outlook.get("kind") == "fail" and c.address not in said:
            said[c.address] = str(outlook.get("words") or "it could never be placed")
    return [f"{name}: {why}" for name, why in sorted(said.items())]
