"""Who a bearer token is, and what it may do: the one place the control plane decides either.

Owns: ``Role`` (``read``: look and follow logs; ``write``: create, update and delete runs, apply
a source; ``admin``: tokens and quotas, besides), ``Identity`` (a token's name, its scope (one
workspace of an org, or the whole org) and its role, and the words of a refusal), and ``Tokens``
(the server's own token, the admin of org ``default``, and those an admin made: ``identify``,
``create``, ``revoke``, ``visible``).

A token made by an admin is shown once, when it is made; the store keeps only its SHA-256
(``token_hash``: a token is 256 random bits, so a plain digest is as good as a slow one) and
``Tokens`` keeps the same in memory, so that a call is identified by one digest and one lookup,
and a revoked token is refused by the very next call.

The API asks ``Identity.refusal`` on every call (``api.context``); the console (a login with a
token, then a session) asks ``Tokens.identify`` once, keeps the token's digest (``Tokens.holder``)
in the session and asks ``Tokens.held`` on every request, so that a revoked token ends its
sessions and its unused one-time links at once. Must not touch: HTTP, routes, SQL (the
``Store``'s), the scheduler.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..wire.teams import Role
from .scopes import DEFAULT, is_name

if TYPE_CHECKING:
    from .store import Store

__all__ = ["SERVER_TOKEN", "AuthError", "Identity", "Role", "Tokens", "token_hash"]

#: The name of the server's own token (``astra server --token``, or ``$ASTRA_HOME/token``).
SERVER_TOKEN = "server"


class AuthError(Exception):
    """A token cannot be made or revoked as asked: ``status`` (403, 404, 409, 422) and words."""

    def __init__(self, status: int, words: str) -> None:
        super().__init__(words)
        self.status = status


@dataclass(frozen=True, slots=True)
class Identity:
    """A token's name, scope and role: the whole org (``workspace`` None) or one workspace of it."""

    name: str
    org: str
    workspace: str | None
    role: Role

    def covers(self, org: str, workspace: str) -> bool:
        """Whether ``workspace`` of ``org`` is within this token's scope."""
        return org == self.org and self.workspace in (None, workspace)

    def may(self, role: Role) -> bool:
        return self.role.rank >= role.rank

    def words(self) -> str:
        """``admin of org default``, ``write in workspace team-a of org default``."""
        if self.workspace is None:
            return f"{self.role} of org {self.org}"
        return f"{self.role} in workspace {self.workspace} of org {self.org}"

    def refusal(self, org: str, workspace: str, role: Role) -> str | None:
        """Why this token may not make a call of ``role`` in ``workspace`` of ``org`` (the words
        of a 403, naming the scope it holds); ``None`` when it may."""
        if not self.covers(org, workspace):
            return f"this token ({self.name}) holds {self.words()}, not workspace {workspace} of org {org}"
        if not self.may(role):
            return f"this token ({self.name}) holds {self.words()}: this call needs {role}"
        return None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "org": self.org, "workspace": self.workspace, "role": str(self.role)}


def token_hash(text: str) -> str:
    """What the store keeps of a token: the SHA-256 of its text, in hex."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Tokens:
    """The server's token and those an admin made (kept in ``store``), by the digest of their text."""

    def __init__(self, server_token: str, store: Store) -> None:
        self._server = server_token.encode("utf-8", "surrogatepass")
        self._server_key = token_hash(server_token)
        self.server = Identity(SERVER_TOKEN, DEFAULT, None, Role.ADMIN)
        self.store = store
        self._by_hash: dict[str, tuple[Identity, dict[str, Any]]] = {}
        for row in store.token_rows():
            self._keep(row)

    def _keep(self, row: dict[str, Any]) -> None:
        who = Identity(row["name"], row["org"], row["workspace"], Role(row["role"]))
        self._by_hash[row["hash"]] = (who, row)

    def identify(self, text: str) -> Identity | None:
        """Who the bearer token ``text`` is; ``None``: no token this server knows (or one revoked)."""
        if hmac.compare_digest(text.encode("utf-8", "surrogatepass"), self._server):
            return self.server
        found = self._by_hash.get(token_hash(text))
        return None if found is None else found[0]

    def holder(self, text: str) -> str | None:
        """The key a console session keeps of the token ``text`` (its digest, never the text):
        what ``held`` looks up again on every request; ``None``: no token this server knows."""
        return token_hash(text) if self.identify(text) is not None else None

    def held(self, key: str) -> Identity | None:
        """Who the token of ``key`` (``holder``'s) is now; ``None`` once it is revoked."""
        if hmac.compare_digest(key, self._server_key):
            return self.server
        found = self._by_hash.get(key)
        return None if found is None else found[0]

    def visible(self, caller: Identity) -> list[dict[str, Any]]:
        """The tokens ``caller`` may see and revoke (an org's admin: the org's; a workspace's: the
        workspace's), by name, without their digests."""
        rows = [row for who, row in self._by_hash.values() if self._sees(caller, who)]
        keep = ("name", "org", "workspace", "role", "created_at", "created_by")
        return [{k: r[k] for k in keep} for r in sorted(rows, key=lambda r: r["name"])]

    @staticmethod
    def _sees(caller: Identity, who: Identity) -> bool:
        if who.org != caller.org:
            return False
        return caller.workspace is None or who.workspace == caller.workspace

    def create(
        self, caller: Identity, name: str, role: Role, workspace: str | None, now: float
    ) -> tuple[dict[str, Any], str]:
        """Make a token for ``workspace`` of the caller's org (``None``: the whole org): its row
        (without digest) and its text, which is never kept. ``AuthError`` when the caller may not,
        or the name is taken."""
        org = caller.org
        if not caller.may(Role.ADMIN):
            raise AuthError(
                403, f"this token ({caller.name}) holds {caller.words()}: making tokens needs admin"
            )
        if workspace is None and caller.workspace is not None:
            raise AuthError(
                403,
                f"this token ({caller.name}) holds {caller.words()}: "
                "a token for the whole org needs the org's admin",
            )
        if workspace is not None and not caller.covers(org, workspace):
            raise AuthError(403, caller.refusal(org, workspace, Role.ADMIN) or "")
        if not is_name(name) or name == SERVER_TOKEN:
            raise AuthError(422, f"a token's name must be a lowercase name other than {SERVER_TOKEN!r}")
        text = secrets.token_urlsafe(32)
        row = {
            "org": org,
            "name": name,
            "workspace": workspace,
            "role": str(role),
            "hash": token_hash(text),
            "created_at": now,
            "created_by": caller.name,
        }
        from .store import NameExists

        try:
            self.store.add_token(row)
        except NameExists as exc:
            raise AuthError(409, str(exc)) from exc
        self._keep(row)
        return {k: v for k, v in row.items() if k != "hash"}, text

    def revoke(self, caller: Identity, name: str) -> dict[str, Any]:
        """Revoke token ``name`` of the caller's org: refused from the next call on. Its row (without
        digest); ``AuthError`` 404 when the caller sees no token of that name."""
        if not caller.may(Role.ADMIN):
            raise AuthError(
                403, f"this token ({caller.name}) holds {caller.words()}: revoking tokens needs admin"
            )
        found = next(
            (
                (h, who, row)
                for h, (who, row) in self._by_hash.items()
                if who.org == caller.org and who.name == name
            ),
            None,
        )
        if found is None or not self._sees(caller, found[1]):
            where = f"org {caller.org}" if caller.workspace is None else f"workspace {caller.workspace}"
            raise AuthError(404, f"no token named {name} in {where}")
        digest, _, row = found
        self.store.remove_token(caller.org, name)
        del self._by_hash[digest]
        return {k: v for k, v in row.items() if k != "hash"}
