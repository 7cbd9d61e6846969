"""A Slurm cluster's secrets: kept sealed in its state folder, and handed to one job at a time.

astra's Slurm cluster has no server, so it keeps the secrets itself: each value sealed with
AES-256-GCM (``cryptography``'s ``AESGCM``, a fresh nonce each time, the secret's name as
associated data) in ``secrets/NAME`` of the state folder (folder 0700, files 0600), under a key
(32 random bytes, base64, made 0600 the first time) at ``$ASTRA_SLURM_SECRETS_KEY``, else
``secrets.key`` in the state folder. The state folder is on the filesystem the nodes share (the
jobs' logs are there): put the key elsewhere (a local disk of the submit host) and a copy of the
shared folder alone reveals no value. ``rotate`` seals every value anew under a new key in the
same file (``astra secret rotate-key --server slurm://``; the order of its writes is in its
docstring). They are set by ``astra watch --age-identity FILE --server
slurm://`` from the age-encrypted secrets ``astra.yaml`` declares (``plan_secrets`` and
``set_secret``, the loop's calls, as for an Astraeus server), or by ``set_secret`` of a library
user (docs/secrets.md).

Owns: the store (``SlurmSecrets``) and its key (made, read, rotated), and what one job is given
(``job_file``): the values its worker templates read (a part per template: a heterogeneous
job has several), as a JSON file of mode 0600 in ``jobsecrets/`` (folder 0700), which the job's
wrapper (``jobwrapper``) reads and removes as it starts, on the job's first node; its path
reaches the job through ``--export`` (a path, not a value).

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


def _write_private(path: Path, data: bytes, *, durable: bool = False) -> None:
    """``data`` into ``path``, mode 0600 from its first byte, whole or not at all; ``durable``:
    on the disk (``fsync``) before it is renamed into place, so a power cut keeps the order of
    such writes."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
        if durable:
            out.flush()
            os.fsync(out.fileno())
    os.replace(tmp, path)
    if durable:
        _sync_dir(path.parent)


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _new_key() -> bytes:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return base64.b64encode(AESGCM.generate_key(bit_length=256)) + b"\n"


class SlurmSecrets:
    """The sealed secrets of one state folder (module docstring)."""

    def __init__(self, state_dir: Path, key_file: str | os.PathLike[str] | None = None):
        self.folder = state_dir / "secrets"
        self.jobs = state_dir / "jobsecrets"
        given = key_file if key_file is not None else os.environ.get(KEY_VARIABLE)
        self.key_file = Path(given) if given else state_dir / "secrets.key"

    @property
    def next_key_file(self) -> Path:
        """Where ``rotate`` writes the new key before every value is sealed under it
        (``KEY.next``, beside the key: as the server's ``secrets.key.next``)."""
        return self.key_file.with_name(self.key_file.name + ".next")

    def _key(self) -> bytes:
        if not self.key_file.exists():
            _private_dir(self.key_file.parent)
            _write_private(self.key_file, _new_key())
        return _load_key(self.key_file)

    def _keys(self) -> list[bytes]:
        """The keys a value may be sealed with: the key, and the new one of a rotation cut
        short (``rotate``), which the next ``rotate`` finishes."""
        key = self._key()
        return [key, _load_key(self.next_key_file)] if self.next_key_file.exists() else [key]

    def names(self) -> list[str]:
        return (
            sorted(p.name for p in self.folder.glob("*") if not p.name.endswith(".tmp"))
            if self.folder.exists()
            else []
        )

    def read(self, name: str) -> bytes | None:
        path = self.folder / name
        if not path.exists():
            return None
        return self._open(name, path.read_bytes(), self._keys())[0]

    def _open(self, name: str, sealed: bytes, keys: list[bytes]) -> tuple[bytes, bytes]:
        """The value of secret ``name`` and the key of ``keys`` it opens with."""
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        for key in keys:
            try:
                return AESGCM(key).decrypt(sealed[:_NONCE], sealed[_NONCE:], name.encode()), key
            except InvalidTag:
                continue
        raise ClusterError(f"secret {name!r} does not open with the key {self.key_file}")

    def rotate(self) -> int:
        """Seal every value anew under a new random key, kept in the same file (``key_file``);
        how many values. The caller holds the records' lock (``ClusterSecrets``), as every
        writer of the store does, so no value is set or deleted meanwhile.

        The order, so that a kill at any moment leaves every value readable with the keys on
        disk: (1) every value is opened first, with the key (a value that does not open stops
        it here, before anything is written); (2) the new key is written beside the key, as
        ``KEY.next`` (whole, 0600, on the disk: ``_write_private``), which ``read`` also tries
        from then on; (3) each value is sealed under the new key into a temporary file that is
        renamed over its own (one value at a time, whole: each is sealed under the key or the
        new one, and both are on disk); (4) only then is ``KEY.next`` renamed over the key (one
        ``rename``, atomic), and the old key is gone. A rotation cut short leaves ``KEY.next``:
        reads open each value with one of the two, and the next ``rotate`` takes that new key
        up (it does not make another, which would leave values sealed under a key on no disk)
        and finishes. Keeping one key file whose bytes change, rather than a key id in each
        file (as the server's rows have), keeps ``secrets/NAME`` and the key's format as they
        were."""
        names = self.names()
        keys = self._keys()
        opened = {n: self._open(n, (self.folder / n).read_bytes(), keys) for n in names}
        if not self.next_key_file.exists():
            _write_private(self.next_key_file, _new_key(), durable=True)
        fresh = _load_key(self.next_key_file)
        for name, (value, key) in opened.items():
            if key != fresh:
                _write_private(self.folder / name, _seal(fresh, name, value), durable=True)
        os.replace(self.next_key_file, self.key_file)
        _sync_dir(self.key_file.parent)
        return len(opened)

    def store(self, name: str, value: bytes) -> bool:
        """Seal ``value`` as secret ``name``; whether it is new."""
        import re

        if not re.match(SECRET_NAME_PATTERN, name) or not value:
            raise Rejected(
                f"secret {name!r}: a name of letters, digits, '-', '_', '.' and a value of at least a byte"
            )
        new = not (self.folder / name).exists()
        _private_dir(self.folder)
        _write_private(self.folder / name, _seal(self._key(), name, value))
        return new

    def delete(self, name: str) -> None:
        try:
            (self.folder / name).unlink()
        except FileNotFoundError:
            raise NotFound(f"no secret {name!r}") from None

    def job_file(self, templates: list[TaskTemplate], nonce: str, index: int, address: str) -> Path | None:
        """The secrets file of copy (or group job) ``index`` of submission ``nonce`` (module
        docstring): a part per worker template of the job (a heterogeneous job has several), or
        ``None`` when none reads any; ``Rejected`` naming a secret not set (a run naming one is
        held until it is, ``held``: none reaches here) or a NUL in an env value."""
        parts = [self._part(t, address) for t in templates]
        if not any(p["env"] or p["files"] for p in parts):
            return None
        path = _private_dir(self.jobs) / f"{nonce}.{index}"
        _write_private(path, json.dumps({"parts": parts}).encode())
        return path

    def _part(self, template: TaskTemplate, address: str) -> dict[str, dict[str, str]]:
        """One template's values, in base64: its env secrets (by variable), its secret files (by path)."""
        env, files = {}, {}
        for key, value in sorted((template.env or {}).items()):
            if isinstance(value, SecretRef):
                env[key] = self._value(value.secret, address, env=True)
        for f in template.secret_files or ():
            files[f.mount_path] = self._value(f.name, address, env=False)
        return {
            "env": {k: base64.b64encode(v).decode() for k, v in env.items()},
            "files": {k: base64.b64encode(v).decode() for k, v in files.items()},
        }

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


def _load_key(path: Path) -> bytes:
    try:
        key = base64.b64decode(path.read_bytes().strip(), validate=True)
    except (OSError, binascii.Error) as exc:
        raise ClusterError(f"cannot read the secrets key {path}") from exc
    if len(key) != 32:
        raise ClusterError(f"the secrets key {path} is not 32 bytes of base64 (AES-256)")
    return key


def _seal(key: bytes, name: str, value: bytes) -> bytes:
    """``value`` sealed as secret ``name`` under ``key``: a fresh nonce, then AES-GCM's output."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(_NONCE)
    return nonce + AESGCM(key).encrypt(nonce, value, name.encode())
