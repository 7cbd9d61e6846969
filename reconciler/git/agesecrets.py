"""Secrets committed to a source encrypted with age (``*.age``), decrypted for the reconcile loop.

Owns: ``read_identities`` (an age identity file: ``AGE-SECRET-KEY-1…`` lines, ``#`` comments, as
``age-keygen`` writes it) and ``decrypt_secrets`` (each secret ``astra.yaml`` declares, its file
read from the source's folder and decrypted with ``pyrage``: ``{name: value}``). Any problem (an
identity file that cannot be read, a file missing, not age, or not for this identity) is an
``AgeSecretError`` naming the file, and nothing is decrypted: the loop applies nothing from that
commit (``LoadFailed``). Values never appear in an error's words.

Must not touch: the cluster (the loop sets the values), the load, the plan.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from .gitcli import SourceError

__all__ = ["AgeSecretError", "decrypt_secrets", "read_identities"]


class AgeSecretError(SourceError):
    """A secret's age file (or the identity) cannot be used; the words name the file."""


def read_identities(path: str) -> list[object]:
    """The age identities of ``path`` (``astra watch --age-identity FILE``)."""
    from pyrage import IdentityError, x25519

    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.strip() for line in f]
    except (OSError, UnicodeDecodeError) as exc:
        raise AgeSecretError(
            f"cannot read the age identity {path}: {getattr(exc, 'strerror', None) or exc}"
        ) from exc
    keys = [line for line in lines if line.startswith("AGE-SECRET-KEY-")]
    if not keys:
        raise AgeSecretError(
            f"the age identity {path} holds no AGE-SECRET-KEY-1… line (age-keygen writes one)"
        )
    try:
        return [x25519.Identity.from_str(k) for k in keys]
    except IdentityError as exc:
        raise AgeSecretError(f"the age identity {path} holds a key that is not an age key") from exc


def decrypt_secrets(
    declared: Iterable[tuple[str, str]], folder: str, identities: list[object]
) -> dict[str, bytes]:
    """Each declared secret (name, its file relative to ``folder``), decrypted; ``AgeSecretError``
    naming the first file that does not decrypt."""
    import pyrage

    out: dict[str, bytes] = {}
    for name, file in declared:
        path = os.path.normpath(os.path.join(folder, file))
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise AgeSecretError(f"secret {name}: cannot read {file}: {exc.strerror or exc}") from exc
        try:
            out[name] = pyrage.decrypt(data, identities)
        except pyrage.DecryptError as exc:
            words = str(exc).splitlines()[0] if str(exc) else "it does not decrypt"
            raise AgeSecretError(
                f"secret {name}: {file} does not decrypt with the age identity given ({words}): "
                "encrypt it to that identity's recipient (age -r age1…)"
            ) from exc
    return out
