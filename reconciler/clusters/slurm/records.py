"""The Slurm cluster's memory: one JSON record per run under the state folder, and the one lock.

A run's record says which Slurm jobs the run is: the document it was given, its resource
version, its shape, and every submission (``attempts``: job id, nonce, the units it covers, the
restart it spends, why, when), so ``get_run`` returns the document even after Slurm has forgotten
the jobs, and what astra saw a job end as (``seen``) outlives Slurm's memory of it.

Owns: the state folder (``$ASTRA_SLURM_STATE``, else ``$ASTRA_HOME/slurm``, else
``~/.astra/slurm``): ``runs/<name>.json`` (written atomically), ``logs/<name>/`` (the jobs' output:
on a real cluster this must be on a filesystem the nodes share) and ``lock``; the lock that
serializes every change and observation (``locked``: the one place it is taken), so two astra
processes never resubmit the same worker twice; the records' shape (``new_record``,
``group_record``, ``units``); which log files hold a worker's output.

Must not touch: Slurm's commands, the clock (times come in as arguments), restart decisions.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reconciler.runspec.models import Run

from ..base import NotFound
from .groups import group_gpus, group_offsets
from .submission import Submission, spec_hash

__all__ = [
    "RECORD_VERSION",
    "RunRecords",
    "default_state_dir",
    "group_record",
    "new_record",
    "units",
]

RECORD_VERSION = 1


def default_state_dir() -> Path:
    """``$ASTRA_SLURM_STATE``, else ``$ASTRA_HOME/slurm``, else ``~/.astra/slurm``."""
    if os.environ.get("ASTRA_SLURM_STATE"):
        return Path(os.environ["ASTRA_SLURM_STATE"])
    home = os.environ.get("ASTRA_HOME")
    return (Path(home) if home else Path.home() / ".astra") / "slurm"


class RunRecords:
    """The records of one state folder."""

    def __init__(self, state_dir: Path):
        self.state_dir = state_dir

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the state folder's lock (``flock``, exclusive, waiting as long as it takes)."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.state_dir / "lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def runs_dir(self) -> Path:
        path = self.state_dir / "runs"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def path(self, name: str) -> Path:
        return self.runs_dir() / f"{name}.json"

    def log_dir(self, name: str) -> Path:
        return self.state_dir / "logs" / name

    def names(self) -> list[str]:
        """Every run with a record, sorted."""
        return sorted(p.stem for p in self.runs_dir().glob("*.json"))

    def exists(self, name: str) -> bool:
        return self.path(name).exists()

    def load(self, name: str) -> dict[str, Any]:
        record: dict[str, Any] = json.loads(self.path(name).read_text())
        return record

    def load_or_404(self, name: str, address: str) -> dict[str, Any]:
        if not self.exists(name):
            raise NotFound(f"no run {name} on {address}")
        return self.load(name)

    def save(self, record: dict[str, Any]) -> None:
        path = self.path(record["name"])
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
        tmp.replace(path)

    def remove(self, name: str) -> None:
        """Forget a run: its record and its logs."""
        self.path(name).unlink()
        shutil.rmtree(self.log_dir(name), ignore_errors=True)

    def worker_log(self, worker: str) -> str | None:
        """The output of worker ``worker`` (``<run>-<rank>`` or ``<run>-<group>-<i>``), ``None`` if
        no run has that worker. The longest run name that fits wins (``a-b-0`` of ``a-b``)."""
        for name in sorted(self.names(), key=len, reverse=True):
            rank = worker.removeprefix(f"{name}-")
            if worker.startswith(f"{name}-") and not rank.isdigit():
                record = self.load(name)
                for gi, g in enumerate(record.get("groups") or ()):
                    i = rank.removeprefix(f"{g['name']}-")
                    if rank.startswith(f"{g['name']}-") and i.isdigit() and int(i) < g["replicas"]:
                        return self._read_group_logs(record, gi, int(i))
            if worker.startswith(f"{name}-") and rank.isdigit():
                record = self.load(name)
                if int(rank) < record["size"]:
                    return self._read_logs(record, int(rank))
        return None

    def _read_logs(self, record: dict[str, Any], rank: int) -> str:
        attempt = units(record)[rank if record["kind"] == "array" else 0]
        job, logs = attempt["job_id"], self.log_dir(record["name"])
        if record["kind"] == "array":
            files = [logs / f"{job}_{rank}.out"]
        elif record["kind"] == "gang":
            files = (
                [logs / f"{job}.out", logs / f"{job}.{rank}.out"]
                if rank == 0
                else [logs / f"{job}.{rank}.out"]
            )
        else:
            files = [logs / f"{job}.out"]
        return "".join(f.read_text(errors="replace") for f in files if f.exists())

    def _read_group_logs(self, record: dict[str, Any], gi: int, i: int) -> str:
        attempt = units(record)[gi]
        job, logs = attempt["job_id"], self.log_dir(record["name"])
        g = record["groups"][gi]
        if record["kind"] == "hetjob":
            # Components have consecutive job ids; a het step numbers tasks across components.
            files = [logs / f"{job + gi}.{g['offset'] + i}.out"]
            if gi == 0 and i == 0:
                files.insert(0, logs / f"{job}.out")
        else:
            files = [logs / f"{job}.{i}.out"]
            if i == 0:
                files.insert(0, logs / f"{job}.out")
        return "".join(f.read_text(errors="replace") for f in files if f.exists())


# ---- the records' shape --------------------------------------------------------------------------


def _base_record(run: Run, doc: dict[str, Any], sub: Submission, now: float) -> dict[str, Any]:
    return {
        "version": RECORD_VERSION,
        "name": run.metadata.name,
        "document": doc,
        "resource_version": 1,
        "spec_hash": spec_hash(run),
        "created_at": now,
        "kind": sub.kind,
        "size": sub.size,
        "gpus_per_worker": sub.gpus_per_worker,
        "script": sub.script,
        "attempts": [],
        "seen": {},
        "failed_cancelled": False,
    }


def new_record(
    run: Run, doc: dict[str, Any], sub: Submission, now: float, *, job_id: int, nonce: str
) -> dict[str, Any]:
    """The record of a run of one worker template, just submitted as job ``job_id``."""
    record = _base_record(run, doc, sub, now)
    record["attempts"] = [
        {"job_id": job_id, "nonce": nonce, "indices": None, "restart": 0, "why": "", "at": now}
    ]
    return record


def group_record(run: Run, doc: dict[str, Any], sub: Submission, now: float) -> dict[str, Any]:
    """The record of a run with worker groups, before its jobs are submitted."""
    groups = list(run.spec.task_groups or ())
    gpus, offsets = group_gpus(run), group_offsets(groups)
    record = _base_record(run, doc, sub, now)
    record["script"] = ""
    record["groups"] = [
        {"name": g.name, "replicas": g.replicas, "offset": offsets[i], "gpus": gpus[i]}
        for i, g in enumerate(groups)
    ]
    return record


def units(record: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Each unit's current attempt: the last submission that covers it."""
    kind = record["kind"]
    count = (
        record["size"] if kind == "array" else len(record["groups"]) if kind in ("groups", "hetjob") else 1
    )
    out: dict[int, dict[str, Any]] = {}
    for attempt in record["attempts"]:
        for i in attempt["indices"] if attempt["indices"] is not None else range(count):
            out[i] = attempt
    return out
