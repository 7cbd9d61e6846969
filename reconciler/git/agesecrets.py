"""Secrets committed to a source encrypted with age (``*.age``), decrypted for the reconcile loop.

Owns ``decrypt_secrets`` (each secret ``astra.yaml`` declares, its file read from the source's
folder and decrypted with the identities of ``agekeys.read_identities``: ``{name: value}``) and
``sealed_secrets`` (the same files, still sealed: for a server that holds the identity, ``astra
server --age-identity``). Any problem (an identity file that cannot be read, a file missing,
not age, or not for this identity) is an ``AgeSecretError`` naming the file, and nothing is
decrypted: the loop applies nothing from that commit (``LoadFailed``). Values never appear in
an error's words.

Must not touch: the cluster (the loop sets the values), the load, the plan.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from ..agekeys import AgeError, open_sealed
from ..agekeys import read_identities as _read_identities
from .gitcli import SourceError

__all__ = ["AgeSecretError", "decrypt_secrets", "read_identities", "sealed_secrets"]


class AgeSecretError(SourceError):
    """A secret's age file (or the identity) cannot be used; the words name the file."""


def read_identities(path: str) -> list[object]:
    """The age identities of ``path`` (``--age-identity FILE``)."""
    try:
        return _read_identities(path)
    except AgeError as exc:
        raise AgeSecretError(str(exc)) from exc


def sealed_secrets(declared: Iterable[tuple[str, str]], folder: str) -> dict[str, bytes]:
    """Each declared secret's age file as it is (relative to ``folder``), by name."""
    out: dict[str, bytes] = {}
    for name, file in declared:
        path = os.path.normpath(os.path.join(folder, file))
        try:
            with open(path, "rb") as f:
                out[name] = f.read()
        except OSError as exc:
            raise AgeSecretError(f"secret {name}: cannot read {file}: {exc.strerror or exc}") from exc
    return out


def decrypt_secrets(
    declared: Iterable[tuple[str, str]], folder: str, identities: list[object]
) -> dict[str, bytes]:
    """Each declared secret (name, its file relative to ``folder``), decrypted; ``AgeSecretError``
    naming the first file that does not decrypt."""
    declared = list(declared)
    files = dict(declared)
    out: dict[str, bytes] = {}
    for name, data in sealed_secrets(declared, folder).items():
        try:
            out[name] = open_sealed(data, identities)
        except AgeError as exc:
            raise AgeSecretError(
                f"secret {name}: {files[name]} does not decrypt with the age identity given ({exc}): "
                "encrypt it to that identity's recipient (age -r age1…)"
            ) from exc
    return out
