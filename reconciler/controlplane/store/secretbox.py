"""The key that encrypts a workspace's secrets at rest, and the encryption itself (AES-256-GCM).

Owns: ``SecretBox``, the keys a store seals and opens secret values with. A value is sealed
with AES-GCM (``cryptography``'s ``AESGCM``) under a 256-bit key, a fresh 96-bit nonce each
time, and the secret's address (``ORG/WORKSPACE/NAME``) as associated data: a sealed value
copied onto another secret's row does not open. Each row records the id of its key (the first
16 hex digits of the key's SHA-256: it names the key, it reveals nothing of it), so a box may
hold two keys while one is being replaced.

The key lives in a file (``SecretBox.at(path)``): the server's home's ``secrets.key`` (made
with mode 0600 the first time, 32 random bytes as base64), or the file ``astra server
--secrets-key-file`` names (an operator's, perhaps from a vault: it must exist). A copy of the
database alone reveals no value. Rotating (``next_key``, then ``promote``) writes the new
key beside the old one first (``secrets.key.next``), re-encrypts every row under it in one
transaction (the store's), and only then renames it over the old one; a crash in between leaves
both files, and a box opened from them holds both keys, so no value is lost either way.

``SecretBox.ephemeral()``: a key that lives in memory only, for a store no server's home holds
(tests, a library user's in-memory store): its secrets are lost with the process.

Must not touch: rows, SQL (``secrets``), HTTP. Never logs or returns a key or a value in words.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .errors import SecretKeyError

__all__ = ["KEY_FILE", "SecretBox", "SecretKeyError"]

#: The key's file in the server's home.
KEY_FILE = "secrets.key"
_NONCE = 12


def _key_id(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:16]


def _read_key(path: Path) -> bytes:
    try:
        text = path.read_text(encoding="ascii").strip()
        key = base64.b64decode(text, validate=True)
    except OSError as exc:
        raise SecretKeyError(f"cannot read the secrets key {path}: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, binascii.Error) as exc:
        raise SecretKeyError(f"the secrets key {path} is not base64 text") from exc
    if len(key) != 32:
        raise SecretKeyError(f"the secrets key {path} holds {len(key)} bytes, not 32 (AES-256)")
    return key


def _write_key(path: Path, key: bytes) -> None:
    """``key`` into a new file ``path``, mode 0600 from its first byte."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(base64.b64encode(key).decode() + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.chmod(path, 0o600)
    except OSError as exc:
        raise SecretKeyError(f"cannot write the secrets key {path}: {exc.strerror or exc}") from exc


class SecretBox:
    """The keys secrets are sealed with: ``current`` seals, any held key opens its own rows."""

    def __init__(self, keys: list[bytes], path: Path | None = None) -> None:
        self._keys = {_key_id(k): k for k in keys}
        self.current = _key_id(keys[0])
        self.path = path

    @classmethod
    def at(cls, path: str | os.PathLike[str], *, create: bool = True) -> SecretBox:
        """The box of the key file ``path`` (made, 0600, when missing and ``create``); a
        ``secrets.key.next`` left beside it by a rotation cut short is held too, as the current key."""
        path = Path(path)
        if not path.exists():
            if not create:
                raise SecretKeyError(f"the secrets key {path} does not exist")
            _write_key(path, AESGCM.generate_key(bit_length=256))
        keys = [_read_key(path)]
        pending = path.with_name(path.name + ".next")
        if pending.exists():
            keys.insert(0, _read_key(pending))
        return cls(keys, path)

    @classmethod
    def ephemeral(cls) -> SecretBox:
        """A box whose key lives in this process only."""
        return cls([AESGCM.generate_key(bit_length=256)])

    def seal(self, value: bytes, address: str) -> tuple[str, bytes]:
        """``value`` sealed under the current key: (the key's id, nonce + ciphertext)."""
        nonce = os.urandom(_NONCE)
        sealed = AESGCM(self._keys[self.current]).encrypt(nonce, value, address.encode())
        return self.current, nonce + sealed

    def open(self, key_id: str, sealed: bytes, address: str) -> bytes:
        """The value ``seal`` sealed for ``address`` with key ``key_id``; ``SecretKeyError`` when
        this box does not hold that key or the bytes do not open (changed, or another row's)."""
        key = self._keys.get(key_id)
        if key is None:
            raise SecretKeyError(
                f"secret {address} is sealed with key {key_id}, which this server does not hold: "
                "give the server the key file it was set with (--secrets-key-file)"
            )
        try:
            return AESGCM(key).decrypt(sealed[:_NONCE], sealed[_NONCE:], address.encode())
        except InvalidTag as exc:
            raise SecretKeyError(f"secret {address} does not open with its key: its row was changed") from exc

    def next_key(self) -> SecretBox:
        """A box whose current key is new, holding this one's keys too; written to
        ``KEY.next`` (0600) when this box has a file: ``promote`` it once the rows are sealed anew."""
        key = AESGCM.generate_key(bit_length=256)
        if self.path is not None:
            _write_key(self.path.with_name(self.path.name + ".next"), key)
        return SecretBox([key, *self._keys.values()], self.path)

    def promote(self) -> SecretBox:
        """This box's current key alone, its file renamed over the old key's: after every row is
        sealed with it."""
        key = self._keys[self.current]
        if self.path is not None:
            try:
                os.replace(self.path.with_name(self.path.name + ".next"), self.path)
            except OSError as exc:
                raise SecretKeyError(
                    f"cannot replace the secrets key {self.path}: {exc.strerror or exc}"
                ) from exc
        return SecretBox([key], self.path)
