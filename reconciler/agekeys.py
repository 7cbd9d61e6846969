"""age identities and decryption (``pyrage``), for both sides that decrypt a secret committed
with age: the reconcile loop (``--age-identity`` of ``astra watch``, ``plan``, ``apply``:
``git.agesecrets``) and the server (``astra server --age-identity``: ``POST /secrets:plan`` and
``PUT /secrets/{name}`` of a still sealed value).

Owns ``read_identities(path)`` (an identity file as ``age-keygen`` writes it: ``AGE-SECRET-KEY-1…``
lines, ``#`` comments) and ``open_sealed(data, identities)``; every failure is an ``AgeError``
in words (the file, or what is wrong), never a value.

Must not touch: files other than the identity, the network.
"""

from __future__ import annotations

__all__ = ["AgeError", "open_sealed", "read_identities"]


class AgeError(Exception):
    """An identity or an age file that cannot be used, in words."""


def read_identities(path: str) -> list[object]:
    """The age identities of ``path``."""
    from pyrage import IdentityError, x25519

    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.strip() for line in f]
    except (OSError, UnicodeDecodeError) as exc:
        raise AgeError(
            f"cannot read the age identity {path}: {getattr(exc, 'strerror', None) or exc}"
        ) from exc
    keys = [line for line in lines if line.startswith("AGE-SECRET-KEY-")]
    if not keys:
        raise AgeError(f"the age identity {path} holds no AGE-SECRET-KEY-1… line (age-keygen writes one)")
    try:
        return [x25519.Identity.from_str(k) for k in keys]
    except IdentityError as exc:
        raise AgeError(f"the age identity {path} holds a key that is not an age key") from exc


def open_sealed(data: bytes, identities: list[object]) -> bytes:
    """``data`` (an age file's bytes) decrypted; ``AgeError`` with age's first line of words."""
    import pyrage

    try:
        return pyrage.decrypt(data, identities)
    except pyrage.DecryptError as exc:
        raise AgeError(str(exc).splitlines()[0] if str(exc) else "it does not decrypt") from exc
