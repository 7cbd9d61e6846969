"""Bounds on a local worker's processes and memory: a cgroup of its own, where the host lets the
server make one; words when a worker reached one.

Owns: finding where this server may make cgroups (``find_cgroups``: cgroup v2, one tree with
the ``pids`` and ``memory`` controllers, else cgroup v1's ``pids`` and ``memory`` hierarchies;
``None`` where neither can be written: an unprivileged user, a container without its cgroups),
one cgroup per worker's attempt (``Cgroups.make``: ``pids.max``, and the memory limit of the
worker's ``requested_resources.memory_bytes`` when it gives one), the command line that puts
the worker in it before anything of it runs (``Cgroups.join``: ``sh`` writes its own pid to
each ``cgroup.procs``, then ``exec``s the command: every process after it is the cgroup's),
what the worker reached (``Cgroups.reached``: a fork refused by ``pids.max``, a process killed
for memory), and removing the cgroup once the worker has ended (``Cgroups.remove``).

Without cgroups a worker's processes are bounded by ``RLIMIT_NPROC`` (``prlimit``: the
processes of its user, all of them, not the worker's alone) and its memory is not bounded
(``RLIMIT_AS`` would break the CUDA runtime, which maps far more than it uses): what holds is
said in docs/limits.md.

Must not touch: the store, the scheduler, HTTP; processes but the cgroups' files.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CGROUP_ROOT", "Cgroups", "bounds_said", "find_cgroups", "join", "nproc_prefix", "reached_words"]

CGROUP_ROOT = Path("/sys/fs/cgroup")
#: The folder of the server's workers' cgroups in each tree (one server per host may make it;
#: a second one shares it, each worker's cgroup named by its home's and its own key).
FOLDER = "astra-workers"
#: ``sh`` joins each cgroup named before ``--``, then runs the command after it.
_JOIN = 'for f do [ "$f" = -- ] && break; echo $$ > "$f" || exit 126; shift; done; shift; exec "$@"'


@dataclass(frozen=True, slots=True)
class Cgroups:
    """Where this server makes its workers' cgroups: ``v2``: one tree (``pids`` is it, ``memory``
    the same); v1: each controller's own."""

    pids: Path
    memory: Path | None
    v2: bool

    def _folders(self, key: str) -> list[Path]:
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", key)
        return [self.pids / name] + ([self.memory / name] if self.memory and not self.v2 else [])

    def make(self, key: str, max_processes: int, memory_bytes: int | None) -> list[str]:
        """The cgroup of a worker's attempt ``key``, bounded; the ``cgroup.procs`` to join.
        Raises ``OSError`` where it cannot be made (the worker does not start: said)."""
        folders = self._folders(key)
        for folder in folders:
            folder.mkdir(exist_ok=True)
        (folders[0] / "pids.max").write_text(f"{max_processes}\n")
        if memory_bytes is not None and self.memory is not None:
            if self.v2:
                (folders[0] / "memory.max").write_text(f"{memory_bytes}\n")
            else:
                (folders[-1] / "memory.limit_in_bytes").write_text(f"{memory_bytes}\n")
        return [str(f / "cgroup.procs") for f in folders]

    def reached(self, key: str) -> dict[str, int]:
        """What the worker's cgroup refused or killed: ``{"processes": forks refused, "memory":
        processes killed}``, each only when it happened."""
        folders = self._folders(key)
        out: dict[str, int] = {}
        refused = _count(folders[0] / "pids.events", "max")
        if refused:
            out["processes"] = refused
        if self.memory is not None:
            events = folders[0] / "memory.events" if self.v2 else folders[-1] / "memory.oom_control"
            killed = _count(events, "oom_kill")
            if killed:
                out["memory"] = killed
        return out

    def remove(self, key: str) -> None:
        """Remove the worker's cgroup (its processes are gone; one left keeps it, harmlessly)."""
        for folder in self._folders(key):
            with contextlib.suppress(OSError):
                folder.rmdir()


def join(procs: list[str], argv: list[str]) -> list[str]:
    """``argv`` run by a ``sh`` that first joins each cgroup of ``procs``."""
    return ["/bin/sh", "-c", _JOIN, "astra-bounds", *procs, "--", *argv]


def nproc_prefix(max_processes: int) -> list[str]:
    """Where no cgroup can be made: ``prlimit`` sets ``RLIMIT_NPROC`` (the user's processes)."""
    return ["prlimit", f"--nproc={max_processes}:{max_processes}", "--"]


def find_cgroups(root: Path = CGROUP_ROOT) -> Cgroups | None:
    """Where this server may make its workers' cgroups, or ``None`` (tried by making the folder)."""
    try:
        if (root / "cgroup.controllers").exists():  # v2: the tree's root delegates pids and memory
            have = (root / "cgroup.controllers").read_text().split()
            if "pids" not in have:
                return None
            wanted = " ".join(f"+{c}" for c in ("pids", "memory") if c in have)
            (root / "cgroup.subtree_control").write_text(wanted)
            folder = root / FOLDER
            folder.mkdir(exist_ok=True)
            (folder / "cgroup.subtree_control").write_text(wanted)
            return Cgroups(folder, folder if "memory" in have else None, v2=True)
        pids = root / "pids"
        if not (pids / "cgroup.procs").exists():
            return None
        (pids / FOLDER).mkdir(exist_ok=True)
        memory = root / "memory" / FOLDER
        try:
            memory.mkdir(exist_ok=True)
        except OSError:  # pids alone: the memory of a worker is not bounded (said in docs/limits.md)
            return Cgroups(pids / FOLDER, None, v2=False)
        return Cgroups(pids / FOLDER, memory, v2=False)
    except OSError:
        return None


def _count(events: Path, name: str) -> int:
    """The number after ``name`` in a cgroup's events file (0 when it is not there)."""
    try:
        text = events.read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == name and value.strip().isdigit():
            return int(value)
    return 0


def reached_words(reached: dict[str, int], max_processes: int, memory_bytes: int | None) -> str | None:
    """What a worker's reason says of the bounds it reached (``None``: none)."""
    said = []
    if "processes" in reached:
        n = reached["processes"]
        forks = "a fork was" if n == 1 else f"{n} forks were"
        said.append(f"reached its bound of {max_processes} processes (max_processes): {forks} refused")
    if "memory" in reached:
        limit = f"{memory_bytes} bytes" if memory_bytes is not None else "its memory"
        said.append(f"out of memory: a process was killed at {limit} (requested_resources.memory_bytes)")
    words = "; ".join(said)
    return words[:1].upper() + words[1:] if said else None


def bounds_said(cgroups: Cgroups | None) -> str:
    """What the server says at start of its workers' bounds (docs/limits.md, "Workers")."""
    if cgroups is None:
        return (
            "workers' bounds: no cgroup can be made here: a worker's processes are bounded by its "
            "user's RLIMIT_NPROC, its memory is not bounded; see docs/limits.md"
        )
    memory = "and memory (requested_resources.memory_bytes) " if cgroups.memory is not None else ""
    return f"workers' bounds: each worker's processes (max_processes) {memory}in a cgroup of its own"
