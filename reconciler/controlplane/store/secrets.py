"""The secrets of the store: an org's workspaces' named values, sealed at rest (``/secrets``).

Owns the ``secrets`` table's writes and reads (``KeptSecrets``, the part of ``Store`` that serves
them): set (create or replace), list and read (metadata: name, size, who set it and when, never
the value), delete (``NotFound``), and the one reader of a value in the clear,
``secret_value(name, workspace)``: what the executors give a worker, and what any server-side
part that needs a workspace's secret (a notification sink's token) calls. Each is one
transaction. Values are sealed by the store's ``SecretBox`` (``secretbox``: AES-GCM, the
secret's address as associated data); ``rotate_secrets_key`` seals every row anew under a new
key (``astra server rotate-secrets-key``).

Must not touch: runs (which runs use a secret is the API's to say), the key file (``secretbox``),
HTTP, logs: no method puts a value in an exception's words.
"""

from __future__ import annotations

from typing import Any, Literal

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Engine

from .drives import workspace_words
from .errors import NotFound
from .secretbox import SecretBox
from .tables import SECRETS

__all__ = ["SECRET_COLUMNS", "KeptSecrets", "secret_missing"]

#: What setting a value would do (``secret_changes``).
Change = Literal["create", "update", "none"]
#: What a secret's metadata is: every column but the sealed value and its key.
SECRET_COLUMNS = ("org", "workspace", "name", "size", "set_by", "set_at", "created_at")


def _split(workspace: str) -> tuple[str, str]:
    org, _, name = workspace.partition("/")
    return org, name


def secret_missing(name: str, workspace: str) -> str:
    """``secret 'hf-token' does not exist in workspace ml`` (``workspace``: ``ORG/WORKSPACE``)."""
    return f"secret {name!r} does not exist in {workspace_words(workspace)}"


class KeptSecrets:
    """The secrets' part of ``Store``: every method is one transaction on ``self.engine``."""

    engine: Engine
    secrets: SecretBox
    #: every workspace's secrets' names, as ``secret_names`` read them last (``None``: to read)
    _names: dict[str, frozenset[str]] | None = None

    def secret_names(self) -> dict[str, frozenset[str]]:
        """Every workspace's (``ORG/WORKSPACE``) secrets' names: what the scheduler holds a run
        for. Read once, then kept until a secret is set or deleted through this store."""
        if self._names is None:
            s = SECRETS
            found: dict[str, set[str]] = {}
            with self.engine.connect() as conn:
                for r in conn.execute(select(s.c.org, s.c.workspace, s.c.name)):
                    found.setdefault(f"{r.org}/{r.workspace}", set()).add(r.name)
            self._names = {ws: frozenset(names) for ws, names in found.items()}
        return self._names

    def set_secret(
        self, name: str, value: bytes, who: str, now: float, workspace: str
    ) -> tuple[dict[str, Any], bool]:
        """Set secret ``name`` of ``workspace`` (``ORG/WORKSPACE``) to ``value``, sealed; its
        metadata, and whether it is new (else its value was replaced)."""
        org, ws = _split(workspace)
        key_id, sealed = self.secrets.seal(value, f"{workspace}/{name}")
        s = SECRETS
        where = (s.c.org == org, s.c.workspace == ws, s.c.name == name)
        values = {"key_id": key_id, "sealed": sealed, "size": len(value), "set_by": who, "set_at": now}
        with self.engine.begin() as conn:
            created = conn.execute(select(s.c.created_at).where(*where)).scalar()
            if created is None:
                row = {"org": org, "workspace": ws, "name": name, "created_at": now, **values}
                conn.execute(insert(s).values(**row))
            else:
                conn.execute(update(s).where(*where).values(**values))
        self._names = None
        return self._meta(org, ws, name, values, now if created is None else created), created is None

    @staticmethod
    def _meta(org: str, ws: str, name: str, values: dict[str, Any], created: float) -> dict[str, Any]:
        meta = {"org": org, "workspace": ws, "name": name, "created_at": created}
        return {**meta, **{k: values[k] for k in ("size", "set_by", "set_at")}}

    def secret_rows(self, workspace: str) -> list[dict[str, Any]]:
        """The metadata of ``workspace``'s secrets, by name (no value, sealed or not)."""
        s = SECRETS
        org, ws = _split(workspace)
        q = select(*(s.c[c] for c in SECRET_COLUMNS)).where(s.c.org == org, s.c.workspace == ws)
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(q.order_by(s.c.name)).mappings()]

    def secret_row(self, name: str, workspace: str) -> dict[str, Any] | None:
        """The metadata of one secret, or ``None``."""
        s = SECRETS
        org, ws = _split(workspace)
        q = select(*(s.c[c] for c in SECRET_COLUMNS)).where(
            s.c.org == org, s.c.workspace == ws, s.c.name == name
        )
        with self.engine.connect() as conn:
            row = conn.execute(q).mappings().first()
        return dict(row) if row else None

    def secret_value(self, name: str, workspace: str) -> bytes | None:
        """Secret ``name``'s value in the clear, or ``None`` when ``workspace`` (``ORG/WORKSPACE``)
        has none of that name. ``SecretKeyError`` when its row does not open with the key held.
        The one way to read a value: never put what it returns in a log, an answer or an error."""
        s = SECRETS
        org, ws = _split(workspace)
        q = select(s.c.key_id, s.c.sealed).where(s.c.org == org, s.c.workspace == ws, s.c.name == name)
        with self.engine.connect() as conn:
            row = conn.execute(q).first()
        if row is None:
            return None
        return self.secrets.open(row.key_id, row.sealed, f"{workspace}/{name}")

    def secret_changes(self, values: dict[str, bytes], workspace: str) -> dict[str, Change]:
        """What setting each of ``values`` would do: ``create``, ``update`` (another value) or
        ``none`` (the same value), by name; compared in the clear here, never answered as a value."""
        import hmac

        out: dict[str, Change] = {}
        for name, value in sorted(values.items()):
            have = self.secret_value(name, workspace)
            out[name] = "create" if have is None else "none" if hmac.compare_digest(have, value) else "update"
        return out

    def delete_secret(self, name: str, workspace: str) -> None:
        """Forget secret ``name``. ``NotFound`` when there is none."""
        s = SECRETS
        org, ws = _split(workspace)
        with self.engine.begin() as conn:
            gone = conn.execute(
                delete(s).where(s.c.org == org, s.c.workspace == ws, s.c.name == name)
            ).rowcount
        self._names = None
        if not gone:
            raise NotFound(secret_missing(name, workspace))

    def rotate_secrets_key(self) -> tuple[str, int]:
        """A new key for every secret of every workspace (``astra server rotate-secrets-key``):
        the new key's id, and how many values were sealed anew. See ``secretbox`` for the order
        of the writes, which no crash can leave without a key for a row."""
        fresh = self.secrets.next_key()
        count = self._rekey(fresh)
        self.secrets = fresh.promote()
        return self.secrets.current, count

    def _rekey(self, box: SecretBox) -> int:
        """Seal every secret anew under ``box``'s current key, in one transaction (``box`` holds
        the keys they are sealed with now); how many."""
        s = SECRETS
        with self.engine.begin() as conn:
            rows = conn.execute(select(s.c.org, s.c.workspace, s.c.name, s.c.key_id, s.c.sealed)).all()
            for r in rows:
                address = f"{r.org}/{r.workspace}/{r.name}"
                key_id, sealed = box.seal(box.open(r.key_id, r.sealed, address), address)
                where = (s.c.org == r.org, s.c.workspace == r.workspace, s.c.name == r.name)
                conn.execute(update(s).where(*where).values(key_id=key_id, sealed=sealed))
        return len(rows)
