"""Teams on one cluster, as the store keeps them: workspaces, tokens, quotas and the audit trail.

Owns the reads and writes of those tables (``KeptTeams``, the part of ``Store`` that serves
them): every method is one transaction. A token is kept as its name, scope, role and the SHA-256
of its text (``hash``), never the text. The audit trail keeps the newest ``keep`` events of each
workspace: an event added removes the ones beyond (one ``DELETE`` by the index on org,
workspace, id), so the table never grows past ``keep`` times the number of workspaces.

Must not touch: what a role may do or whose a token is (``controlplane.auth``), runs, sources,
HTTP. It never reads a clock: callers pass ``now``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import bindparam, delete, insert, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from ...wire import text
from .database import insert_many
from .errors import NameExists
from .tables import AUDIT, QUOTAS, TOKENS, WORKSPACES

__all__ = ["KeptTeams", "write_audit"]


class KeptTeams:
    """The teams' part of ``Store``: every method is one transaction on ``self.engine``."""

    engine: Engine

    # -- workspaces --------------------------------------------------------------------------

    def workspace_names(self, org: str) -> list[str]:
        """The org's workspaces, by name."""
        w = WORKSPACES
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(select(w.c.name).where(w.c.org == org).order_by(w.c.name))]

    def add_workspace(self, org: str, name: str, now: float) -> bool:
        """Make workspace ``name`` of ``org`` unless it is there; whether it was made now."""
        w = WORKSPACES
        with self.engine.begin() as conn:
            if conn.execute(select(w.c.name).where(w.c.org == org, w.c.name == name)).first():
                return False
            conn.execute(insert(w).values(org=org, name=name, created_at=now))
        return True

    # -- tokens ------------------------------------------------------------------------------

    def token_rows(self) -> list[dict[str, Any]]:
        """Every token made by an admin (its hash, not its text), by org and name."""
        t = TOKENS
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(select(t).order_by(t.c.org, t.c.name)).mappings()]

    def add_token(self, row: Mapping[str, Any]) -> None:
        """Keep a new token (``org``, ``name``, ``workspace``, ``role``, ``hash``, ``created_at``,
        ``created_by``); ``NameExists`` when the org has a token of that name."""
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(TOKENS).values(**row))
        except IntegrityError as exc:
            raise NameExists(f"a token named {row['name']} exists in org {row['org']}") from exc

    def remove_token(self, org: str, name: str) -> bool:
        """Forget a token (it is refused from now on); whether there was one."""
        t = TOKENS
        with self.engine.begin() as conn:
            return bool(conn.execute(delete(t).where(t.c.org == org, t.c.name == name)).rowcount)

    # -- quotas ------------------------------------------------------------------------------

    def quota_rows(self, cluster: str | None = None) -> list[dict[str, Any]]:
        """Every quota (of one cluster, when given), by org and workspace."""
        q = select(QUOTAS).order_by(QUOTAS.c.org, QUOTAS.c.workspace, QUOTAS.c.cluster)
        if cluster is not None:
            q = q.where(QUOTAS.c.cluster == cluster)
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(q).mappings()]

    def put_quota(
        self, org: str, workspace: str, cluster: str, gpus: int | None, runs: int | None, now: float
    ) -> None:
        """Set a workspace's quota on a cluster (both ``None``: none is kept)."""
        q = QUOTAS
        where = (q.c.org == org, q.c.workspace == workspace, q.c.cluster == cluster)
        with self.engine.begin() as conn:
            if gpus is None and runs is None:
                conn.execute(delete(q).where(*where))
            elif (
                conn.execute(update(q).where(*where).values(gpus=gpus, runs=runs, updated_at=now)).rowcount
                == 0
            ):
                conn.execute(
                    insert(q).values(
                        org=org, workspace=workspace, cluster=cluster, gpus=gpus, runs=runs, updated_at=now
                    )
                )

    # -- the audit trail ---------------------------------------------------------------------

    def add_audit(self, events: Sequence[Mapping[str, Any]], keep: int) -> None:
        """Record writes (each ``detail`` a JSON-able object) in one transaction, and forget each
        workspace's events beyond its newest ``keep``. A batch of runs is one call: one commit,
        not one a run."""
        if not events:
            return
        with self.engine.begin() as conn:
            write_audit(conn, events, keep)

    def audit_rows(
        self,
        org: str,
        workspace: str,
        *,
        kind: str | None = None,
        name: str | None = None,
        since: float | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """A workspace's events, oldest first (``limit``: the newest that many), of one target
        (``kind``, ``name``) or all, at ``since`` or later."""
        a = AUDIT
        q = select(a).where(a.c.org == org, a.c.workspace == workspace)
        if kind is not None:
            q = q.where(a.c.kind == kind)
        if name is not None:
            q = q.where(a.c.name == name)
        if since is not None:
            q = q.where(a.c.at >= since)
        q = q.order_by(a.c.id.desc())
        if limit is not None:
            q = q.limit(limit)
        with self.engine.connect() as conn:
            rows = [dict(r) for r in conn.execute(q).mappings()]
        for r in rows:
            r["detail"] = json.loads(r["detail"])
        return rows[::-1]


#: ``write_audit``'s read of a workspace's oldest event kept, made once (SQLAlchemy builds a
#: statement and its cache key in Python each time one is made)
_EDGE = (
    select(AUDIT.c.id)
    .where(AUDIT.c.org == bindparam("org_"), AUDIT.c.workspace == bindparam("workspace_"))
    .order_by(AUDIT.c.id.desc())
    .offset(bindparam("keep_"))
    .limit(1)
)


def write_audit(conn: Any, events: Sequence[Mapping[str, Any]], keep: int) -> None:
    """``KeptTeams.add_audit``'s writes, in the caller's transaction (a batch of runs writes its
    runs' events in its own: ``BatchWrites.create_runs``)."""
    if not events:
        return
    a = AUDIT
    rows = [{**e, "detail": text.compact(e.get("detail") or {}, sort_keys=True).decode()} for e in events]
    insert_many(conn, a, rows)
    for org, workspace in sorted({(r["org"], r["workspace"]) for r in rows}):
        edge = conn.execute(_EDGE, {"org_": org, "workspace_": workspace, "keep_": keep}).scalar()
        if edge is not None:
            mine = (a.c.org == org, a.c.workspace == workspace)
            conn.execute(delete(a).where(*mine, a.c.id <= edge))
