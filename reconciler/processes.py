"""Processes of this host: telling one apart from a later one of the same pid, and whether it ended.

A pid alone names a process only while it runs: once it ends, the kernel gives the number to
the next. With the process's start time (field 22 of ``/proc/PID/stat``, clock ticks after
boot), and the boot and the pid namespace it was counted in, a record of a process (the holder
of a lock, a worker) says for certain whether that very process still runs, when it ran here.

Owns: ``process_start_time``, ``process_alive`` (the executor's workers), ``Process`` (this
process, described for a lock's record: host, pid, start) and ``Process.gone`` (known to have
ended: on this host, in this boot and pid namespace, and no process of that pid and start runs).
Must not touch: anything of astra's; standard library only (the state and the control plane both
import it).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

__all__ = ["Process", "process_alive", "process_start_time"]


def process_start_time(pid: int) -> str | None:
    """The start time of ``pid`` (field 22 of /proc/PID/stat), to tell it from a reused pid."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()[19]


def process_alive(pid: int | None, started: str | None) -> bool:
    """Whether the process ``pid`` that started at ``started`` still runs (not a zombie)."""
    if not pid:
        return False
    now = process_start_time(pid)
    if now is None:
        return False
    if started is not None and now != started:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def _clock() -> str | None:
    """This boot and this pid namespace: what a start time is counted in (``None`` off Linux)."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        namespace = os.readlink("/proc/self/ns/pid").strip("pid:[]")
    except OSError:
        return None
    return f"{boot}/{namespace}" if boot else None


@dataclass(frozen=True)
class Process:
    """A process as a record keeps it: its host, its pid, and when it started (``TICKS/BOOT/NS``:
    its start time in clock ticks after boot, the boot's id and the pid namespace; ``None`` where
    /proc cannot say)."""

    host: str
    pid: int
    started: str | None

    @classmethod
    def this(cls) -> Process:
        """This process."""
        return cls.of(os.getpid())

    @classmethod
    def of(cls, pid: int) -> Process:
        """Process ``pid`` of this host, as it is now (``started`` is ``None`` if it is gone)."""
        ticks, clock = process_start_time(pid), _clock()
        return cls(socket.gethostname(), pid, f"{ticks}/{clock}" if ticks and clock else None)

    def gone(self) -> bool:
        """Whether this process is known to have ended: it ran on this host, in this boot and pid
        namespace, and no process of its pid and start time runs now. ``False`` whenever that
        cannot be told for certain (another host, another boot, no start time recorded)."""
        if self.host != socket.gethostname() or not self.started or not self.pid:
            return False
        ticks, _, clock = self.started.partition("/")
        if clock != _clock():
            return False
        return not process_alive(self.pid, ticks)
