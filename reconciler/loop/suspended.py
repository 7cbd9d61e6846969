"""Whether a source is suspended, as a watch asks before each pass (``astra source suspend``).

``suspension(reconciler)`` is the source's suspension as its store keeps it
(``reconciler.state.suspension``), or ``None``; a store that keeps none (a test's) or a read that
fails answer ``None``: the pass goes on and its own reads of the store say what is wrong.
``held_status`` is what the watch says (its ``on_status``) when it finds the source suspended: the
status it last wrote with ``state`` and ``reason`` ``Suspended`` and the suspension's words. It is
not written to the store: the store's status holds the suspension already.

While suspended, a watch looks again every ``SUSPEND_POLL`` seconds (and at each event) and runs
no pass: no file event, webhook, resync or retry; once resumed its next pass is a full one.

Must not touch: the steps of a pass (``steps``), the stores' storage.
"""

from __future__ import annotations

import logging
from typing import Any

from ..state.suspension import Suspension, suspended_words
from .steps import Reconciler

__all__ = ["SUSPENDED", "SUSPEND_POLL", "held_status", "suspension"]

log = logging.getLogger(__name__)

#: Seconds between two looks at a suspended source's suspension (to see it resumed).
SUSPEND_POLL = 5.0
#: The state and reason a watch says of a suspended source.
SUSPENDED = "Suspended"


def suspension(reconciler: Reconciler) -> Suspension | None:
    """The source's suspension, or ``None`` (not suspended, or not known: see the docstring)."""
    read = getattr(reconciler.store, "suspension", None)
    if read is None:
        return None
    try:
        return Suspension.from_json(read(reconciler.source.name))
    except Exception as exc:  # the pass's own reads say what is wrong with the store
        log.debug("suspension of %s not read: %s", reconciler.source.name, exc)
        return None


def held_status(reconciler: Reconciler, held: Suspension, now: float) -> dict[str, Any]:
    """What a watch says of its suspended source (see the module docstring)."""
    last = reconciler._written or {}
    return {
        **last,
        "state": SUSPENDED,
        "reason": SUSPENDED,
        "message": suspended_words(reconciler.source.name, held),
        "updated_at": now,
    }
