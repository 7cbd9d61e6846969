"""GPU-hours and the store's own figures: each worker's hold of GPUs, the store's size, its sources' passes.

Owns ``HoldChanges`` (the holds a tick opened and closed, and the runs it ended: written by
``Store.commit_tick`` in the tick's transaction), and ``KeptUsage`` (a part of ``Store``):
``open_holds`` (the holds still open, read at start), ``hold_rows`` (the holds of a scope that
overlap a window: what ``astra usage`` adds up; never pruned, so they outlive a deleted run and
the audit trail's ``--audit-keep``), ``size_bytes`` (a SQLite file with its write-ahead
log, or PostgreSQL's ``pg_database_size``) and ``source_summaries`` (each source of an org: its
workspace, name, the state its last pass ended in, when it was reported, and when it last
applied), read in one statement without the sources' inventories.

Must not touch: the scheduler, HTTP; it never reads a clock.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, insert, or_, select, text, update

from ..scopes import DEFAULT, SOURCE_MARK, Scope, run_key, source_name
from .database import execute_many, insert_many
from .tables import GPU_BUDGETS, GPU_HOLDS, SOURCE_RUNS, SOURCES

__all__ = ["HoldChanges", "KeptUsage", "write_holds"]


@dataclass
class HoldChanges:
    """What a tick did to the GPUs' holds: ``opened`` (rows of ``gpu_holds``), ``closed``
    (``{"b_worker", "ended_at"}``) and ``ended`` (``{"b_run", "outcome"}``: a run's final state,
    given to its holds that have none yet)."""

    opened: list[dict[str, Any]] = field(default_factory=list)
    closed: list[dict[str, Any]] = field(default_factory=list)
    ended: list[dict[str, Any]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.opened or self.closed or self.ended)


_H = GPU_HOLDS.c
_CLOSE = (
    update(GPU_HOLDS)
    .where(_H.worker == bindparam("b_worker"), _H.ended_at.is_(None))
    .values(ended_at=bindparam("ended_at"))
)
_END = (
    update(GPU_HOLDS)
    .where(_H.run == bindparam("b_run"), _H.outcome.is_(None))
    .values(outcome=bindparam("outcome"))
)


def write_holds(conn: Connection, changes: HoldChanges) -> None:
    """A tick's hold changes, in its transaction: closes first (a worker placed again at the same
    instant opens a new hold), then opens, then outcomes."""
    execute_many(conn, _CLOSE, changes.closed)
    insert_many(conn, GPU_HOLDS, changes.opened)
    execute_many(conn, _END, changes.ended)


class KeptUsage:
    """The store's size and its sources' summaries (a mixin of ``Store``: ``self.engine``, ``self.url``)."""

    engine: Any
    url: str

    def open_holds(self, cluster: str) -> dict[str, tuple[float, int, str]]:
        """The holds of ``cluster`` still open: each worker's key, when its hold started, its
        GPUs and its workspace (``ORG/WORKSPACE``)."""
        q = select(_H.worker, _H.started_at, _H.gpus, _H.org, _H.workspace)
        q = q.where(_H.cluster == cluster, _H.ended_at.is_(None))
        with self.engine.connect() as conn:
            return {w: (at, gpus, f"{org}/{ws}") for w, at, gpus, org, ws in conn.execute(q).all()}

    def put_budget(
        self, org: str, workspace: str, cluster: str, budget: tuple[int, str] | None, now: float
    ) -> None:
        """Set (``(gpu_hours, per)``) or lift (None) a workspace's GPU-hour budget on a cluster."""
        b = GPU_BUDGETS.c
        with self.engine.begin() as conn:
            conn.execute(
                delete(GPU_BUDGETS).where(b.org == org, b.workspace == workspace, b.cluster == cluster)
            )
            if budget is not None:
                row = {"org": org, "workspace": workspace, "cluster": cluster, "updated_at": now}
                conn.execute(insert(GPU_BUDGETS).values(**row, gpu_hours=budget[0], per=budget[1]))

    def budget_rows(self, cluster: str) -> list[dict[str, Any]]:
        """The GPU-hour budgets on ``cluster``: org, workspace, gpu_hours, per."""
        b = GPU_BUDGETS.c
        q = select(b.org, b.workspace, b.gpu_hours, b.per).where(b.cluster == cluster)
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(q).mappings().all()]

    def hold_rows(
        self, org: str, workspace: str | None, cluster: str | None, since: float | None, until: float
    ) -> list[dict[str, Any]]:
        """The holds of ``org`` (its ``workspace`` only, unless None; its ``cluster`` only, unless
        None) that overlap ``[since, until)``, oldest first; ``labels`` decoded."""
        where = [_H.org == org, _H.started_at < until]
        if workspace is not None:
            where.append(_H.workspace == workspace)
        if cluster is not None:
            where.append(_H.cluster == cluster)
        if since is not None:
            where.append(or_(_H.ended_at.is_(None), _H.ended_at > since))
        q = select(GPU_HOLDS).where(and_(*where)).order_by(_H.started_at, _H.id)
        with self.engine.connect() as conn:
            rows = [dict(r) for r in conn.execute(q).mappings().all()]
        for r in rows:
            r["labels"] = json.loads(r["labels"])
        return rows

    def sources_of_runs(self, org: str) -> dict[str, str]:
        """Each run key of ``org`` that a source's inventory holds, and that source's name."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(SOURCE_RUNS.c.source, SOURCE_RUNS.c.run)).all()
        out = {}
        for key, run in rows:
            owner = _owner(key)
            if owner[0] == org:
                out[run_key(Scope(*owner), run)] = source_name(key)
        return out

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


def _owner(key: str) -> tuple[str, str, str]:
    """The org, workspace and cluster of a source's key (``scopes.source_key``)."""
    if not key.startswith(SOURCE_MARK) or key.startswith(SOURCE_MARK * 2):
        return DEFAULT, DEFAULT, DEFAULT
    scope = key[1 : key.find(SOURCE_MARK, 1)]
    org, workspace, cluster = [*scope.split("/"), "", "", ""][:3]
    return org, workspace, cluster
