"""The drives of the store: an org's workspaces' named folders (``/drives``), one row each.

Owns the ``drives`` table's writes and reads (``KeptDrives``, the part of ``Store`` that serves
them): create (``NameExists`` on a clash), list, read, delete (``NotFound``). Each is one
transaction. A workspace is named by its key, ``ORG/WORKSPACE`` (``scopes.Scope.workspace_key``,
``scopes.workspace_of`` a run's key): a drive is its workspace's on every cluster of the server.
Whether a drive is in use (a run names it) is the API's to say: it knows the runs.

Must not touch: runs, workers, events (``facade``), sources, the schema (``migrations``), the
drives' folders on disk.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from ..scopes import DEFAULT, DEFAULT_WORKSPACE
from .errors import NameExists, NotFound
from .tables import DRIVES

__all__ = ["KeptDrives", "workspace_words"]


def _split(workspace: str) -> tuple[str, str]:
    """``ORG/WORKSPACE`` as (org, workspace)."""
    org, _, name = workspace.partition("/")
    return org, name


def workspace_words(workspace: str) -> str:
    """``workspace team-a`` (``ORG/WORKSPACE``), and ``of org acme`` outside the default org."""
    org, name = _split(workspace)
    return f"workspace {name}" + ("" if org == DEFAULT else f" of org {org}")


class KeptDrives:
    """The drives' part of ``Store``: every method is one transaction on ``self.engine``."""

    engine: Engine

    def create_drive(
        self, name: str, path: str, now: float, workspace: str = DEFAULT_WORKSPACE
    ) -> dict[str, Any]:
        """Record drive ``name`` of ``workspace`` (``ORG/WORKSPACE``) at ``path``; the row.
        ``NameExists`` when the workspace has one."""
        org, ws = _split(workspace)
        row = {"org": org, "workspace": ws, "name": name, "path": path, "created_at": now}
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(DRIVES).values(**row))
        except IntegrityError as exc:
            raise NameExists(f"drive {name!r} exists in {workspace_words(workspace)}") from exc
        return row

    def drive_rows(self, workspace: str = DEFAULT_WORKSPACE) -> list[dict[str, Any]]:
        """The drives of ``workspace`` (``ORG/WORKSPACE``), by name."""
        d = DRIVES
        org, ws = _split(workspace)
        q = select(d).where(d.c.org == org, d.c.workspace == ws).order_by(d.c.name)
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(q).mappings()]

    def drive_row(self, name: str, workspace: str = DEFAULT_WORKSPACE) -> dict[str, Any] | None:
        d = DRIVES
        org, ws = _split(workspace)
        q = select(d).where(d.c.org == org, d.c.workspace == ws, d.c.name == name)
        with self.engine.connect() as conn:
            row = conn.execute(q).mappings().first()
        return dict(row) if row else None

    def delete_drive(self, name: str, workspace: str = DEFAULT_WORKSPACE) -> None:
        """Forget drive ``name`` (its folder and files stay). ``NotFound`` when there is none."""
        d = DRIVES
        org, ws = _split(workspace)
        where = (d.c.org == org, d.c.workspace == ws, d.c.name == name)
        with self.engine.begin() as conn:
            gone = conn.execute(delete(d).where(*where)).rowcount
        if not gone:
            raise NotFound(f"drive {name!r} does not exist in {workspace_words(workspace)}")
