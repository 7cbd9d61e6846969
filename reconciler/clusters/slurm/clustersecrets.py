"""The Slurm cluster's secrets, as the ``Cluster`` protocol's callers ask for them.

Owns: ``ClusterSecrets``, the part of ``SlurmCluster`` that sets and plans secrets
(``set_secret``, ``plan_secrets``, and ``put_secret``/``list_secrets``/``delete_secret``/
``rotate_secrets_key`` for ``astra secret … --server slurm://``: the calls ``astra watch
--age-identity`` makes, as of an Astraeus server) and gives a submission its secrets
(``_secrets_env`` and ``_group_secrets``, through ``_give``: each job's file, the wrapper's
program, the path to the job). The store is ``secrets``'; the node's side is ``jobwrapper``'s;
a run held for a secret not set is ``held``'s (setting one releases them).

Must not touch: Slurm's commands, the run records' shape, values in any words.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reconciler import masking
from reconciler.clusters.base import Rejected
from reconciler.runspec.models import Run
from reconciler.runspec.secrets import secrets_of_document

from . import jobwrapper
from .held import HeldRuns
from .jobwrapper import program_text
from .records import RunRecords
from .secrets import SlurmSecrets
from .submission import reads_secrets, wrapper_path

__all__ = ["ClusterSecrets"]


class ClusterSecrets(HeldRuns):
    """Secrets of a ``SlurmCluster`` (which sets ``records``, ``secrets``, ``commands`` and
    ``address``)."""

    records: RunRecords
    secrets: SlurmSecrets
    address: str

    # ---- secrets (``secrets``: the store, and each job's file) -------------------------------------

    def set_secret(self, name: str, value: bytes) -> None:
        """Seal secret ``name`` (``astra watch --age-identity`` sets a source's so): the next
        jobs submitted read it, and the runs held for it are released (``held``); none is
        stopped."""
        with self.records.locked():
            self.secrets.store(name, value)
            self._release_readers(name)

    def _readers(self) -> dict[str, list[str]]:
        """Each secret's readers: the recorded runs whose document names it (``records`` locked)."""
        readers: dict[str, list[str]] = {}
        for name in self.records.names():
            for secret in secrets_of_document(self.records.load(name)["document"]):
                readers.setdefault(secret, []).append(name)
        return readers

    def put_secret(self, name: str, value: bytes) -> dict[str, Any]:
        """``astra secret set NAME --server slurm://…``: seal it, release the runs held for it
        (``held``); its metadata (``created``: new; ``released``: the runs released)."""
        with self.records.locked():
            created = self.secrets.store(name, value)
            released = self._release_readers(name)
            return {**self._secret_row(name, self._readers()), "created": created, "released": released}

    def list_secrets(self) -> list[dict[str, Any]]:
        """``astra secret list``: each secret's name, size, owner, time set and readers; no value."""
        with self.records.locked():
            readers = self._readers()
            return [self._secret_row(n, readers) for n in self.secrets.names()]

    def delete_secret(self, name: str, *, force: bool = False) -> dict[str, Any]:
        """``astra secret delete``: refused in words while a recorded run reads it, unless ``force``."""
        with self.records.locked():
            used = self._readers().get(name, [])
            if used and not force:
                message = f"secret {name!r} is read by {', '.join(used)}: delete those runs or give --force"
                raise Rejected(message, [{"message": message}])
            self.secrets.delete(name)
            return {"name": name, "cluster": self.address}

    def rotate_secrets_key(self) -> dict[str, Any]:
        """``astra secret rotate-key``: every value sealed anew under a new key, in the same
        file (``SlurmSecrets.rotate``, under the records' lock the other writers take); how
        many (``secrets``) and the key's file. Runs go on: each job submitted or released from
        now on has its file written from the store, under the new key."""
        with self.records.locked():
            count = self.secrets.rotate()
        return {"secrets": count, "key_file": str(self.secrets.key_file), "cluster": self.address}

    def _secret_row(self, name: str, readers: Mapping[str, list[str]]) -> dict[str, Any]:
        import pwd

        st = (self.secrets.folder / name).stat()
        try:
            owner = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            owner = str(st.st_uid)
        size = st.st_size - 12 - 16  # AES-GCM: the nonce and the tag around the value
        return {
            "name": name,
            "size": size,
            "set_by": owner,
            "set_at": st.st_mtime,
            "used_by": readers.get(name, []),
        }

    def plan_secrets(
        self, values: Mapping[str, bytes], *, sealed: bool = False
    ) -> dict[str, tuple[str, list[str]]]:
        """What setting each of ``values`` would do: ``create``, ``update`` or ``unchanged``,
        and the runs not ended that read it (compared here: no value leaves this process).
        ``sealed`` values (age files) are refused in words: no identity is kept here, as an
        Astraeus server keeps its own (``astra server --age-identity``)."""
        if sealed:
            message = f"{self.address} opens no age file: give --age-identity FILE to decrypt it"
            raise Rejected(message, [{"message": message}])
        with self.records.locked():
            readers = self._readers()
            out = {}
            for name, value in values.items():
                now = self.secrets.read(name)
                change = "create" if now is None else "unchanged" if now == value else "update"
                out[name] = (change, readers.get(name, []))
            return out

    def _secrets_env(self, run: Run, nonce: str, indices: list[int]) -> list[str]:
        """For a job of a run of one worker template (``indices``: the copies whose files to
        write now, none for a job held for a secret not set): ``_give``'s."""
        t = run.spec.task_template
        return self._give([t], nonce, indices, run) if t is not None else []

    def _group_secrets(self, run: Run, nonce: str, groups: tuple[int, ...], *, write: bool) -> list[str]:
        """For the job of worker groups ``groups`` (one, or a heterogeneous job's all): its file
        (named by its first group, a part per group) written when ``write``; ``_give``'s."""
        templates = [(run.spec.task_groups or [])[g].task_template for g in groups]
        return self._give(templates, nonce, [groups[0]] if write else [], run)

    def _give(self, templates: list[Any], nonce: str, indices: list[int], run: Run) -> list[str]:
        """For a job whose worker templates read secrets: each of its files ``indices`` written
        (0600; read and removed by the job's wrapper), the wrapper's program made current, and
        the option that tells the job where its files are (a path, never a value); else nothing."""
        if not any(reads_secrets(t) for t in templates):
            return []
        for i in indices:
            self.secrets.job_file(templates, nonce, i, self.address)
        wrapper = Path(wrapper_path(str(self.records.log_dir(run.metadata.name))))
        text = program_text(inspect.getsource(masking), inspect.getsource(jobwrapper))
        if not wrapper.exists() or wrapper.read_text() != text:
            wrapper.parent.mkdir(parents=True, exist_ok=True)
            tmp = wrapper.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.replace(wrapper)
        return [f"--export=ALL,ASTRA_SECRETS={self.secrets.jobs / nonce}"]
