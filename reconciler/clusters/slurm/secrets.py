"""A Slurm cluster's secrets: kept sealed in its state folder, and handed to one job at a time.

astra's Slurm cluster has no server, so it keeps the secrets itself: each value sealed with
AES-256-GCM (``cryptography``'s ``AESGCM``, a fresh nonce each time, the secret's name as
associated data) in ``secrets/NAME`` of the state folder (folder 0700, files 0600), under a key
(32 random bytes, base64, made 0600 the first time) at ``$ASTRA_SLURM_SECRETS_KEY``, else
``secrets.key`` in the state folder. The state folder is on the filesystem the nodes share (the
jobs' logs are there): put the key elsewhere (a local disk of the submit host) and a copy of the
shared folder alone reveals no value. They are set by ``astra watch --age-identity FILE --server
slurm://`` from the age-encrypted secrets ``astra.yaml`` declares (``plan_secrets`` and
``set_secret``, the loop's calls, as for an Astraeus server), or by ``set_secret`` of a library
user (docs/secrets.md).

Owns: the store (``SlurmSecrets``), and what one job is given (``job_file``): the values its
worker template reads, as a JSON file of mode 0600 in ``jobsecrets/`` (folder 0700), which the
job's wrapper (``jobwrapper``) reads and removes as it starts; its path reaches the job through
``--export`` (a path, not a value).

Must not touch: Slurm's commands, the records, values in any words or error.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from pathlib import Path

from reconciler.runspec.models import TaskTemplate
from reconciler.runspec.secrets import SECRET_NAME_PATTERN, SecretRef

from ..base import ClusterError, NotFound, Rejected

__all__ = ["KEY_VARIABLE", "SlurmSecrets", "missing_secret"]

KEY_VARIABLE = "ASTRA_SLURM_SECRETS_KEY"
_NONCE = 12


def missing_secret(name: str, address: str) -> str:
    return f"Secret {name!r} does not exist on {address}: astra secret set {name} --server {address}"


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def _write_private(path: Path, data: bytes) -> None:
    """``data`` into ``path``, mode 0600 from its first byte, whole or not at all."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(tmp, path)


class SlurmSecrets:
    """The sealed secrets of one state folder (module docstring)."""

    def __init__(self, state_dir: Path, key_file: str | os.PathLike[str] | None = None):
        self.folder = state_dir / "secrets"
        self.jobs = state_dir / "jobsecrets"
        given = key_file if key_file is not None else os.environ.get(KEY_VARIABLE)
        self.key_file = Path(given) if given else state_dir / "secrets.key"

    def _key(self) -> bytes:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if not self.key_file.exists():
            _private_dir(self.key_file.parent)
            _write_private(self.key_file, base64.b64encode(AESGCM.generate_key(bit_length=256)) + b"\n")
        try:
            key = base64.b64decode(self.key_file.read_bytes().strip(), validate=True)
        except (OSError, binascii.Error) as exc:
            raise ClusterError(f"cannot read the secrets key {self.key_file}") from exc
        if len(key) != 32:
            raise ClusterError(f"the secrets key {self.key_file} is not 32 bytes of base64 (AES-256)")
        return key

    def names(self) -> list[str]:
        return (
            sorted(p.name for p in self.folder.glob("*") if not p.name.endswith(".tmp"))
            if self.folder.exists()
            else []
        )

    def read(self, name: str) -> bytes | None:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        path = self.folder / name
        if not path.exists():
            return None
        sealed = path.read_bytes()
        try:
            return AESGCM(self._key()).decrypt(sealed[:_NONCE], sealed[_NONCE:], name.encode())
        except InvalidTag as exc:
            raise ClusterError(f"secret {name!r} does not open with the key {self.key_file}") from exc

    def store(self, name: str, value: bytes) -> bool:
        """Seal ``value`` as secret ``name``; whether it is new."""
        import re

        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if not re.match(SECRET_NAME_PATTERN, name) or not value:
            raise Rejected(
                f"secret {name!r}: a name of letters, digits, '-', '_', '.' and a value of at least a byte"
            )
        new = not (self.folder / name).exists()
        nonce = os.urandom(_NONCE)
        _private_dir(self.folder)
        _write_private(self.folder / name, nonce + AESGCM(self._key()).encrypt(nonce, value, name.encode()))
        return new

    def delete(self, name: str) -> None:
        try:
            (self.folder / name).unlink()
        except FileNotFoundError:
            raise NotFound(f"no secret {name!r}") from None

    def job_file(self, template: TaskTemplate, nonce: str, index: int, address: str) -> Path | None:
        """The secrets file of copy ``index`` of submission ``nonce`` (module docstring), or
        ``None`` when its template reads none; ``Rejected`` naming a secret not set (a run
        naming one is held until it is, ``held``: none reaches here) or a NUL in an env value."""
        env, files = {}, {}
        for key, value in sorted((template.env or {}).items()):
            if isinstance(value, SecretRef):
                env[key] = self._value(value.secret, address, env=True)
        for f in template.secret_files or ():
            files[f.mount_path] = self._value(f.name, address, env=False)
        if not env and not files:
            return None
        doc = {
            "env": {k: base64.b64encode(v).decode() for k, v in env.items()},
            "files": {k: base64.b64encode(v).decode() for k, v in files.items()},
        }
        path = _private_dir(self.jobs) / f"{nonce}.{index}"
        _write_private(path, json.dumps(doc).encode())
        return path

    def forget(self, nonces: set[str]) -> None:
        """Remove the secrets files of these submissions that no job read (never started)."""
        for nonce in nonces:
            for path in self.jobs.glob(f"{nonce}.*"):
                path.unlink(missing_ok=True)

    def _value(self, name: str, address: str, *, env: bool) -> bytes:
        value = self.read(name)
        if value is None:
            raise Rejected(missing_secret(name, address))
        if env and b"\0" in value:
            raise Rejected(
                f"secret {name!r} holds a NUL byte, which an environment variable cannot: "
                "give it as a secret file"
            )
        return value
