"""A source's secrets committed encrypted with age: decrypted, planned and set at each apply.

Owns ``SourceSecrets``: what ``astra.yaml`` declares for one source (``secrets: [{name, file}]``)
and the identity ``astra watch --age-identity FILE`` gives, and the three moves the reconcile
loop makes with them (``Reconciler``'s ``secrets`` step):

* ``decrypt(folder)``: every declared file, decrypted (``git.agesecrets``); any file that
  does not decrypt is an ``AgeSecretError`` naming it, and the pass applies nothing;
* ``plan(cluster, values)``: what setting each would do, asked of the cluster (``POST
  /secrets:plan``: the server compares), as the plan's lines: ``+ secret hf-token``, ``~ secret
  hf-token (changed; read by train)``; an unchanged one says nothing. Never a value, nor a hash of one;
* ``apply(cluster, values, planned)``: the secrets that changed are set (before the runs are
  applied, so a run that reads one does not wait for it).

Must not touch: the runs' plan and apply (the loop's), values in any words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..git.agesecrets import AgeSecretError, decrypt_secrets, read_identities

__all__ = ["NO_SECRETS_API", "SourceSecrets", "secret_lines"]

NO_SECRETS_API = (
    "this source declares secrets, and its cluster keeps none: secrets need an Astraeus API (http…)"
)
NO_IDENTITY = "this source declares secrets: give astra watch --age-identity FILE to decrypt them"


def secret_lines(planned: dict[str, tuple[str, list[str]]]) -> list[str]:
    """The plan's lines for the secrets, sorted: ``+ secret NAME``, ``~ secret NAME (changed)``,
    and the runs not ended that read it (``; read by train, sweep``: their next workers read the
    new value; none is stopped)."""
    said = {"create": "+ secret {}", "update": "~ secret {} (changed{})"}
    lines = []
    for name, (change, readers) in sorted(planned.items()):
        if change in said:
            by = f"; read by {', '.join(readers)}" if readers and change == "update" else ""
            lines.append(said[change].format(name, by))
    return lines


@dataclass(frozen=True)
class SourceSecrets:
    """A source's declared secrets (name, file relative to its folder) and the age identity file."""

    declared: Sequence[tuple[str, str]]
    identity: str | None

    def decrypt(self, folder: str) -> dict[str, bytes]:
        if self.identity is None:
            raise AgeSecretError(NO_IDENTITY)
        return decrypt_secrets(self.declared, folder, read_identities(self.identity))

    def plan(self, cluster: Any, values: dict[str, bytes]) -> dict[str, tuple[str, list[str]]]:
        ask = getattr(cluster, "plan_secrets", None)
        if ask is None:
            raise AgeSecretError(NO_SECRETS_API)
        return ask(values)

    def apply(
        self, cluster: Any, values: dict[str, bytes], planned: dict[str, tuple[str, list[str]]]
    ) -> None:
        for name, (change, _) in sorted(planned.items()):
            if change in ("create", "update"):
                cluster.set_secret(name, values[name])
