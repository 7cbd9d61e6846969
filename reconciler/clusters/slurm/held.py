"""A new run's jobs submitted held (``sbatch --hold``) and their release: what a run waits for
before Slurm may start it.

A new run is submitted held while something it names does not exist yet, and its record's
``awaiting`` says what (``{"runs": [...], "secrets": [...]}``; a plain list, as records made
before secrets waited, is runs): a run of its ``depends_on`` that has no record yet (its create
failed, or a later batch makes it), a secret its workers read that is not set (``astra secret
set NAME --server slurm://…``). The run is created, not refused, so a repo and what it names can
be set up in either order, as on an Astraeus cluster. A restart astra resubmits whose secret
was deleted since the run started is held the same way (``_hold_restart``). The attempts
submitted held say so (``held``), and are the ones released.

``HeldRuns._release`` is the one way out, taken by each observation of the run and by setting a
secret (``ClusterSecrets.put_secret``/``set_secret``, for the runs that wait for it). It asks
again what is missing (the records, the sealed store: a secret deleted while the run waits keeps
it waiting) and, once nothing is, points the jobs' Slurm dependency at the jobs of the runs now
created (``scontrol update Dependency=``), writes each copy's secrets file with the values as
they are now (under the records' lock, so no delete comes between), and ``scontrol release``s
them: a job never starts before its values exist. While it waits the run and its waiting
workers say why (``held_words``: ``Secret 'hf-token' does not exist on slurm://debug: astra
secret set hf-token --server slurm://debug``; the words of a run it waits for come first, as
the control plane's do).

Owns: the record's ``awaiting``, ``dependency`` and ``held_why``, the attempts' ``held``, what a
new run or a restart waits for (``_waits_at_create``, ``_hold_restart``), and the release.

Must not touch: the spec's rules, Slurm's words (``commands``), what a job's secrets file holds
(``secrets``), values in any words.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from reconciler.runspec.models import Run
from reconciler.runspec.parse import parse_run
from reconciler.runspec.secrets import secret_refs

from ..base import Rejected
from .commands import SlurmCommands
from .dependencies import dependency_option
from .records import RunRecords
from .secrets import SlurmSecrets, missing_secret

__all__ = ["HeldRuns", "awaited", "held_words", "missing_secrets"]


def awaited(record: dict[str, Any]) -> tuple[list[str], list[str]]:
    """What a held run waits for: the runs not created yet, the secrets not set (both empty:
    not held, or released)."""
    kept = record.get("awaiting") or {}
    if isinstance(kept, list):  # a record made before secrets waited: runs only
        return list(kept), []
    return list(kept.get("runs", [])), list(kept.get("secrets", []))


def missing_secrets(run: Run, have: Collection[str]) -> list[str]:
    """The secrets ``run``'s workers read that are not in ``have``, each once, in the spec's order."""
    return [n for n in dict.fromkeys(name for _, name in secret_refs(run)) if n not in have]


def held_words(record: dict[str, Any], address: str) -> str | None:
    """Why a held run waits for a secret, in words (``missing_secret``), or ``None``: the first
    secret not set, else what stopped its release (a value an env variable cannot hold)."""
    _, secrets = awaited(record)
    if not secrets:
        return None
    return record.get("held_why") or missing_secret(secrets[0], address)


def _first_jobs(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The attempts of the run's first submission (held or not): not a restart."""
    return [a for a in record["attempts"] if a["restart"] == 0 and not a["why"]]


def _held_jobs(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The attempts submitted held (``held``; a record made before they said so: the first)."""
    return [a for a in record["attempts"] if a.get("held")] or _first_jobs(record)


class HeldRuns:
    """The part of ``SlurmCluster`` that holds and releases new runs (which sets ``records``,
    ``secrets``, ``commands`` and ``address``)."""

    records: RunRecords
    secrets: SlurmSecrets
    commands: SlurmCommands
    address: str

    def _needs(self, run: Run) -> tuple[str | None, list[str]]:
        """The ``--dependency`` of a new run (``dependencies.dependency_option``) from the records
        of the runs it depends on, and the names of those not created yet."""
        if not run.spec.depends_on:
            return None, []
        names = {d.run for d in run.spec.depends_on}
        records = {n: self.records.load(n) if self.records.exists(n) else None for n in names}
        return dependency_option(run, records)

    def _waits_at_create(self, run: Run) -> tuple[str | None, dict[str, list[str]]]:
        """A new run's ``--dependency`` and what it must wait for before release (``awaiting``:
        nothing to wait for when both lists are empty)."""
        needs, runs = self._needs(run)
        secrets = missing_secrets(run, self.secrets.names()) if secret_refs(run) else []
        return needs, {"runs": runs, "secrets": secrets}

    def _release(self, record: dict[str, Any], run: Run) -> None:
        """Release a held run once nothing it waits for is missing (module docstring); and, held
        or not, keep its first jobs' dependency on the jobs astra holds now for the runs it
        depends on (a run restarted since: its new jobs). The record is saved when it changed."""
        was_runs, was_secrets = awaited(record)
        needs, runs = self._needs(run)
        secrets = missing_secrets(run, self.secrets.names()) if was_secrets else []
        first = _first_jobs(record)
        if not runs and needs is not None and needs != record.get("dependency"):
            for attempt in first:
                spec = ",".join(p for p in (attempt.get("after"), needs.removeprefix("--dependency=")) if p)
                self.commands.update(attempt["job_id"], f"Dependency={spec}")
            record["dependency"] = needs
        elif (runs, secrets) == (was_runs, was_secrets) and "held_why" not in record:
            return  # nothing changed: still waiting (or long released)
        if not runs and not secrets and (was_runs or was_secrets):
            held = _held_jobs(record)
            why = self._write_files(record, run, held) if was_secrets else None
            if why is not None:  # still held, in the words of what stopped it
                record["held_why"] = why
                self.records.save(record)
                return
            for attempt in held:
                self.commands.release(attempt["job_id"])
                attempt.pop("held", None)
        record.pop("held_why", None)
        record["awaiting"] = {"runs": runs, "secrets": secrets}
        self.records.save(record)

    def _write_files(self, record: dict[str, Any], run: Run, held: list[dict[str, Any]]) -> str | None:
        """Each held copy's secrets file, with the values as set now; the words of what stops it
        (``secrets.job_file``'s refusal: a NUL byte in an env value), else ``None``."""
        try:
            for attempt in held:
                if record["kind"] in ("groups", "hetjob"):  # a job of groups: one file, a part each
                    groups = attempt["indices"]
                    templates = [(run.spec.task_groups or [])[g].task_template for g in groups]
                    copies: Iterable[int] = [groups[0]]
                else:
                    assert run.spec.task_template is not None
                    templates = [run.spec.task_template]
                    copies = attempt["indices"] if attempt["indices"] is not None else range(record["size"])
                    copies = copies if record["kind"] == "array" else [0]
                for i in copies:
                    self.secrets.job_file(templates, attempt["nonce"], i, self.address)
        except Rejected as exc:
            self.secrets.forget({a["nonce"] for a in held})
            return str(exc)
        return None

    def _hold_restart(self, record: dict[str, Any], run: Run) -> bool:
        """Whether a restart astra resubmits must be held for secrets not set (deleted since the
        run started): those noted in ``awaiting``, released as a new run's are."""
        secrets = missing_secrets(run, self.secrets.names()) if secret_refs(run) else []
        if secrets:
            record["awaiting"] = {"runs": awaited(record)[0], "secrets": secrets}
        return bool(secrets)

    def _release_readers(self, secret: str) -> list[str]:
        """Release the runs held for ``secret`` that nothing else holds (``_release``), as it has
        just been set (the caller holds the lock); the names of those released."""
        released = []
        for name in self.records.names():
            record = self.records.load(name)
            if secret in awaited(record)[1] and not record.get("unmet"):
                self._release(record, parse_run(record["document"]))
                if not any(awaited(record)):
                    released.append(name)
        return released
