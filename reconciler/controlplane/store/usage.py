"""What the store says about itself for ``/metrics``: its size, and each source's last pass and apply.

Owns ``KeptUsage`` (a part of ``Store``): ``size_bytes`` (a SQLite file with its write-ahead
log, or PostgreSQL's ``pg_database_size``) and ``source_summaries`` (each source of an org: its
workspace, name, the state its last pass ended in, when it was reported, and when it last
applied), read in one statement without the sources' inventories.

Must not touch: the scheduler, HTTP; it never reads a clock.
"""

from __future__ import annotations

import json
import os
from typing import Any

from sqlalchemy import select, text

from ..scopes import DEFAULT, SOURCE_MARK, source_name
from .tables import SOURCES

__all__ = ["KeptUsage"]


class KeptUsage:
    """The store's size and its sources' summaries (a mixin of ``Store``: ``self.engine``, ``self.url``)."""

    engine: Any
    url: str

    def size_bytes(self) -> int:
        """The database's size on disk, in bytes (0 when it cannot be told: an in-memory SQLite)."""
        if self.url.startswith("sqlite"):
            path = self.url.split(":///", 1)[1] if ":///" in self.url else ""
            if not path or path == ":memory:":
                return 0
            return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
        with self.engine.connect() as conn:
            return int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one())

    def source_summaries(self, org: str) -> list[dict[str, Any]]:
        """Each source of org ``org``, by key: ``workspace``, ``source`` (its name), ``state``
        (``Ready``, ``Stalled``, …, or None), ``updated_at`` (its status's) and ``applied_at``
        (its newest history entry that applied), on the control plane's clock."""
        s = SOURCES
        with self.engine.connect() as conn:
            rows = conn.execute(select(s.c.name, s.c.status, s.c.history).order_by(s.c.name)).all()
        out = []
        for key, status_text, history_text in rows:
            owner = _owner(key)
            if owner[0] != org or not (status_text or history_text):
                continue
            status = json.loads(status_text) if status_text else {}
            history = json.loads(history_text) if history_text else []
            applied = [h.get("when") for h in history if str(h.get("result", "")).startswith("applied")]
            out.append(
                {
                    "workspace": owner[1],
                    "source": source_name(key),
                    "state": status.get("state"),
                    "updated_at": status.get("updated_at"),
                    "applied_at": next((w for w in reversed(applied) if isinstance(w, int | float)), None),
                }
            )
        return out


def _owner(key: str) -> tuple[str, str]:
    """The org and workspace of a source's key (``scopes.source_key``)."""
    if not key.startswith(SOURCE_MARK) or key.startswith(SOURCE_MARK * 2):
        return DEFAULT, DEFAULT
    scope = key[1 : key.find(SOURCE_MARK, 1)]
    org, workspace, _cluster = [*scope.split("/"), "", "", ""][:3]
    return org, workspace
