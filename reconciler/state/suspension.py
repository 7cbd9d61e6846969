"""A source's suspension (``astra source suspend NAME`` / ``resume``): its data and its words.

A suspended source has no reconcile pass: not from its files' events, its webhook, its resync
or a retry, so nothing is applied and nothing is pruned from it until it is resumed; then the
next pass is a full one (a remote is fetched: the newest commit is applied). It is kept in the
source's status, under the key ``SUSPENDED``, which only ``suspend`` and ``resume`` write:
every store's ``set_status`` keeps what is held there (``keep_suspension``), so that the reconcile
loop, which writes the rest of the status at every step, never clears it, and a suspend made
during a pass holds. Being in the status, it is said wherever the status is (``astra status``,
``astra source list``, the console's Sources page, the API's ``GET /sources/{name}``), and it
needs no file of the source: it works when the source's files or ``astra.yaml`` are broken.

Owns: ``Suspension``, ``SUSPENDED``, ``keep_suspension``, ``suspension_of``, ``suspended_words``.
Must not touch: any store's storage (each store calls ``keep_suspension``), the loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["SUSPENDED", "Suspension", "keep_suspension", "suspended_words", "suspension_of"]

#: The status key a suspension is kept under.
SUSPENDED = "suspended"


@dataclass(frozen=True)
class Suspension:
    """Who suspended the source, when (epoch seconds), and why (their words, may be empty)."""

    by: str
    at: float
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> Suspension | None:
        """The suspension of a status's ``SUSPENDED`` value; ``None`` for none (or not one)."""
        if not isinstance(data, Mapping):
            return None
        at = data.get("at")
        return cls(
            str(data.get("by") or "?"),
            float(at) if isinstance(at, int | float) and not isinstance(at, bool) else 0.0,
            str(data.get("reason") or ""),
        )


def suspension_of(status: Mapping[str, Any] | None) -> Suspension | None:
    """The suspension a source's status holds, or ``None``."""
    return None if not status else Suspension.from_json(status.get(SUSPENDED))


def keep_suspension(held: Mapping[str, Any] | None, written: Mapping[str, Any]) -> dict[str, Any]:
    """The status to store when ``written`` replaces ``held``: ``written`` with ``held``'s
    suspension (whatever ``written`` says of it: only suspend and resume change it)."""
    out = {k: v for k, v in written.items() if k != SUSPENDED}
    kept = (held or {}).get(SUSPENDED)
    if kept:
        out[SUSPENDED] = kept
    return out


def suspended_words(name: str, suspension: Suspension) -> str:
    """What a status line says of a suspended source."""
    why = f": {suspension.reason}" if suspension.reason else ""
    return (
        f"source {name} is suspended by {suspension.by}{why}; no pass runs (nothing is applied or pruned) "
        f"until 'astra source resume {name}'"
    )
