"""The Slurm cluster's memory: one JSON record per run under the state folder, and the one lock.

A run's record says which Slurm jobs the run is: the document it was given, its resource
version, its shape, and every submission (``attempts``: job id, nonce, the units it covers, the
restart it spends, why, when), so ``get_run`` returns the document even after Slurm has forgotten
the jobs, and what astra saw a job end as (``seen``) outlives Slurm's memory of it.

Owns: the state folder (``$ASTRA_SLURM_STATE``, else ``slurm/`` in astra's home,
``reconciler.home.astra_home``: the per-user ``~/.local/state/astra`` unless a project has its
own): ``runs/<name>.json`` (written atomically), ``logs/<name>/`` (the jobs' output:
on a real cluster this must be on a filesystem the nodes share), ``drives.json`` (the cluster's
drives: each one's folder on the shared filesystem, ``drives.parse_drives``) and ``lock``; the lock that
serializes every change and observation (``locked``: the one place it is taken, waiting at most
``LOCK_TIMEOUT``, the lock file saying who holds it), so two astra processes never resubmit the
same worker twice; the records' shape (``new_record``,
``group_record``, ``units``); which log files hold a worker's output.

Must not touch: Slurm's commands, the clock (times come in as arguments), restart decisions.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from reconciler.processes import Process
from reconciler.runspec.models import Run

from ..base import ClusterError, NotFound, Unreachable
from .drives import parse_drives
from .groups import group_gpus, group_offsets
from .submission import Submission, spec_hash

__all__ = [
    "DRIVES_FILE",
    "LOCK_TIMEOUT",
    "RECORD_VERSION",
    "RunRecords",
    "default_state_dir",
    "group_record",
    "new_record",
    "units",
]

RECORD_VERSION = 1
#: The cluster's drives table, in the state folder: ``{"drives": {NAME: FOLDER, …}}``.
DRIVES_FILE = "drives.json"


def _holder() -> dict[str, Any]:
    """This process, as the lock file says who holds the lock: its program and subcommand only
    (``astra apply``; its other arguments may hold a secret, and the folder may be shared)."""
    me = Process.this()
    words = [os.path.basename(sys.argv[0])] if sys.argv and sys.argv[0] else []
    words += [a for a in sys.argv[1:2] if not a.startswith("-")]
    command = " ".join(words)
    return {
        "pid": me.pid,
        "host": me.host,
        "started": me.started,
        "command": command[:200],
        "since": time.time(),
    }


def default_state_dir() -> Path:
    """``$ASTRA_SLURM_STATE``, else ``slurm/`` in astra's home (``reconciler.home``: never a
    ``~/.astra`` of its own, which every folder under ``~`` would then find as its home)."""
    if os.environ.get("ASTRA_SLURM_STATE"):
        return Path(os.environ["ASTRA_SLURM_STATE"])
    from ...home import astra_home

    return astra_home() / "slurm"


#: How long a change or an observation waits for the state folder's lock. Its holder runs
#: Slurm's commands under it (each within ``COMMAND_TIMEOUT``, 30 s): four of them, at most.
LOCK_TIMEOUT = 120.0


class RunRecords:
    """The records of one state folder. ``clock`` and ``sleep`` time the wait for its lock."""

    def __init__(
        self,
        state_dir: Path,
        *,
        lock_timeout: float = LOCK_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.state_dir = state_dir
        self.lock_timeout = lock_timeout
        self._clock, self._sleep = clock, sleep

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the state folder's lock (``flock``, exclusive): ``Unreachable`` after
        ``lock_timeout`` seconds of waiting, naming the holder. While it is held, the lock file
        says who holds it (pid, host, command, since when); the kernel releases the lock of a
        process that ends, however it ends."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.state_dir / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        with os.fdopen(fd, "r+", encoding="utf-8") as f:
            self._wait(f)
            try:
                f.seek(0)
                f.truncate()
                f.write(json.dumps(_holder(), sort_keys=True))
                f.flush()
                yield
            finally:
                f.seek(0)
                f.truncate()
                fcntl.flock(f, fcntl.LOCK_UN)

    def _wait(self, f: IO[str]) -> None:
        deadline = self._clock() + self.lock_timeout
        delay = 0.01
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                left = deadline - self._clock()
                if left <= 0:
                    raise Unreachable(self._held_words(f)) from None
                self._sleep(min(delay, left))
                delay = min(delay * 2, 0.5)

    def _held_words(self, f: IO[str]) -> str:
        """Why the lock could not be had: who holds it, as its file says."""
        f.seek(0)
        try:
            holder = json.loads(f.read() or "{}")
        except ValueError:  # written half: the holder is unknown
            holder = {}
        if isinstance(holder, dict) and holder.get("pid"):
            since = holder.get("since")
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since)) if since else "?"
            who = (
                f"held by pid {holder['pid']} on {holder.get('host', '?')} "
                f"({holder.get('command') or 'a command'}) since {when}"
            )
        else:
            who = "held by another process that does not say which"
        return (
            f"the Slurm state folder {self.state_dir} is locked: {who}; waited {self.lock_timeout:g} s. "
            "Each astra command holds it for a few Slurm commands: if that one hangs, stop it"
        )

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

    def drives(self) -> dict[str, str]:
        """The drives table (``DRIVES_FILE``; none yet: empty); ``ClusterError`` when it is not one."""
        path = self.state_dir / DRIVES_FILE
        try:
            return parse_drives(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:  # unreadable, not JSON, or not a table of drives
            raise ClusterError(f"cannot read the drives of {path}: {exc}") from exc

    def save_drives(self, table: dict[str, str]) -> None:
        """Write the drives table whole (the caller holds the lock)."""
        path = self.state_dir / DRIVES_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"drives": dict(sorted(table.items()))}, indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)

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
            # Components have consecutive job ids. A het step's %t is not the rank past
            # component 0 (Slurm 22.05 wrote rank 1 of component 1 as ``.2.out``): a component's
            # task files are its own, in task order, so its worker ``i`` has the i-th of them.
            mine = sorted(logs.glob(f"{job + gi}.*.out"), key=lambda f: int(f.name.split(".")[1]))
            files = mine[i : i + 1] or [logs / f"{job + gi}.{g['offset'] + i}.out"]
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
