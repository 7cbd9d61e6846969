"""A source's secrets committed encrypted with age: decrypted for its plan and apply.

Owns ``SourceSecrets``: what ``astra.yaml`` declares for one source (``secrets: [{name, file}]``)
and the identity ``--age-identity FILE`` gives (``astra watch``, ``astra plan``, ``astra
apply``): ``read(folder)`` gives every declared file decrypted (``git.agesecrets``; any file
that does not decrypt is an ``AgeSecretError`` naming it, and the pass applies nothing), or,
with no identity given, still sealed: the server opens them with its own identity (``astra
server --age-identity FILE``), and says in words when it has none.
What setting them would do and setting them is ``loop.declared``'s.

Must not touch: the runs' plan and apply (the loop's), values in any words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..git.agesecrets import AgeSecretError, decrypt_secrets, read_identities, sealed_secrets

__all__ = ["NO_IDENTITY", "SourceSecrets"]

NO_IDENTITY = "this source declares secrets: give --age-identity FILE to decrypt them"


@dataclass(frozen=True)
class SourceSecrets:
    """A source's declared secrets (name, file relative to its folder) and the age identity file."""

    declared: Sequence[tuple[str, str]]
    identity: str | None

    def decrypt(self, folder: str) -> dict[str, bytes]:
        if self.identity is None:
            raise AgeSecretError(NO_IDENTITY)
        return decrypt_secrets(self.declared, folder, read_identities(self.identity))

    def read(self, folder: str) -> tuple[dict[str, bytes], bool]:
        """The values, and whether they are still sealed: decrypted with the identity given,
        or, without one, the age files as they are, for the server to open with its own
        (``astra server --age-identity FILE``)."""
        if self.identity is None:
            return sealed_secrets(self.declared, folder), True
        return self.decrypt(folder), False

    def file_of(self, name: str) -> str:
        return dict(self.declared).get(name, "?")
