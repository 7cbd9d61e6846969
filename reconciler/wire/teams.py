"""Teams on one cluster, as the API's models: tokens, workspaces and their quotas, the audit trail.

Owns the shapes of ``/tokens``, ``/workspaces`` and ``/events`` (``reconciler.wire.models``'
two kinds of model, ``Answer`` and ``RequestBody``).
Must not touch: HTTP, the store; what a role may do (``controlplane.auth``).

At a glance (``→`` an answer)::

    tokens      POST TokenCreate → TokenCreated (its text, shown once);  GET → TokenList
                DELETE /tokens/{name} → TokenInfo (revoked)
    workspaces  GET → WorkspaceList;  GET /workspaces/{name} → Workspace (quota, usage)
                PUT /workspaces/{name} → Workspace (made);  PUT …/quota QuotaWrite → Workspace
    events      GET /events → AuditEventList (?run= ?since= ?limit=)
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from .models import EPOCH, Answer, RequestBody, _integral

__all__ = [
    "EVERY",
    "AuditEvent",
    "AuditEventList",
    "Quota",
    "QuotaWrite",
    "Role",
    "TokenCreate",
    "TokenCreated",
    "TokenInfo",
    "TokenList",
    "Usage",
    "Workspace",
    "WorkspaceList",
]

#: A name of a token or a workspace: a run's rules (lowercase letters, digits, '-').
NAME = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
#: ``TokenCreate.workspace`` for a token of the whole org.
EVERY = "*"
#: A token's workspace: a workspace's name, or ``*`` (every workspace of the org).
TOKEN_WORKSPACE = r"^(\*|[a-z]([-a-z0-9]*[a-z0-9])?)$"
#: The most GPUs (or runs) a quota names: far above any cluster, within every JSON reader.
QUOTA_MAX = 1_000_000
#: A quota's count: an ``Integral`` from 0 to ``QUOTA_MAX``, its bounds before the validator (as
#: ``models.Counter``'s): after it, or on the optional field, the schema carries them as words
#: JSON Schema does not know (``ge``), and a client would hold a negative quota valid.
QuotaCount = Annotated[int, Field(ge=0, le=QUOTA_MAX), BeforeValidator(_integral)]


class Role(StrEnum):
    """What a token may do: read (look, follow logs), write (runs, sources), admin (tokens, quotas);
    each role may do what the ones before it may."""

    READ = "read"
    WRITE = "write"
    ADMIN = "admin"

    @property
    def rank(self) -> int:
        return ("read", "write", "admin").index(self.value)


# ---- tokens --------------------------------------------------------------------------------------


class TokenCreate(RequestBody):
    """A token to make: for one workspace (left out: the path's), or (``*``) for the whole org."""

    name: str = Field(
        pattern=NAME, max_length=63, description="Unique in the org; 'server' is the server's own."
    )
    role: Literal["read", "write", "admin"] = Field(description="read, write or admin (a Role).")
    workspace: str | None = Field(
        None,
        pattern=TOKEN_WORKSPACE,
        max_length=63,
        description="Its workspace (left out: the path's); '*': every workspace of the org "
        "(needs the org's admin).",
    )


class TokenInfo(Answer):
    """A token as listed: never its text (which only the answer that made it holds)."""

    name: str
    org: str
    workspace: str | None = Field(description="null: every workspace of the org.")
    role: Role
    created_at: float = Field(description=EPOCH)
    created_by: str = Field(description="The name of the token that made it.")


class TokenCreated(TokenInfo):
    """A token just made, with its text: shown this once, kept by the server only as a digest."""

    token: str = Field(description="The bearer token: shown once, never again.")


class TokenList(Answer):
    items: list[TokenInfo]


# ---- workspaces and quotas -----------------------------------------------------------------------


class Quota(Answer):
    """What a workspace may hold on this cluster at once (null: no limit)."""

    gpus: int | None
    runs: int | None = Field(description="Runs holding machines at once.")


class QuotaWrite(RequestBody):
    """A workspace's quota on this cluster: left out or null, no limit."""

    gpus: QuotaCount | None = None
    runs: QuotaCount | None = None


class Usage(Answer):
    """What a workspace holds on this cluster now."""

    gpus: int
    runs: int = Field(description="Its runs holding machines.")
    pending: int = Field(description="Its runs waiting (Pending).")


class Workspace(Answer):
    """A workspace of an org on this cluster: its quota and what it holds."""

    org: str
    name: str
    cluster: str
    quota: Quota
    usage: Usage


class WorkspaceList(Answer):
    items: list[Workspace]


# ---- the audit trail -----------------------------------------------------------------------------


class AuditEvent(Answer):
    """One write: who made it (the token's name), where, when, and what changed."""

    id: int
    at: float = Field(description=EPOCH)
    org: str
    workspace: str
    cluster: str | None
    token: str = Field(description="The name of the token the write was made with.")
    action: str = Field(description="create, update, delete, apply, forget, revoke, set.")
    kind: str = Field(description="What it was made to: run, source, token, quota, workspace.")
    name: str = Field(description="Its name.")
    source: str | None = Field(description="The source whose apply made it (astra.source), if one did.")
    detail: dict[str, Any] = Field(description="What changed.")


class AuditEventList(Answer):
    items: list[AuditEvent]
