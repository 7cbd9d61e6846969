"""Locks: every lock waits a bounded time and says who holds it; a lock left by the dead says so.

* The source's apply lock records the process that took it (host, pid, start): a lock whose
  holder ran on this host and is gone (an apply killed with SIGKILL) is refused with words that
  say so and how to clear it, never "another apply is running".
* The Slurm state folder's lock (``flock``) gives up after its timeout, naming the holder the
  lock file records (pid, host, command); the wait is timed by a clock the test drives.
* The apply summary after a killed and resumed apply counts every run it handled.
"""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys

import pytest

from reconciler.cli.app import run
from reconciler.clusters.base import Unreachable
from reconciler.clusters.slurm.records import RunRecords
from reconciler.processes import Process
from reconciler.state import Lock, Locked, SqlSourceStore

TAKE_AND_WAIT = """\
import sys
from reconciler.state import SqlSourceStore
lock = SqlSourceStore(sys.argv[1]).lock("s", "ci@runner:7", 100.0)
print(lock.id, flush=True)
sys.stdin.read()  # holds the lock until it is killed
"""


def killed_holder(url: str) -> tuple[str, int]:
    """An apply's process that took the source's lock and was killed with SIGKILL: its lock id, pid."""
    proc = subprocess.Popen(
        [sys.executable, "-c", TAKE_AND_WAIT, url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    lock_id = proc.stdout.readline().strip()
    proc.kill()
    proc.wait()
    return lock_id, proc.pid


def test_a_lock_left_by_a_killed_apply_says_its_holder_is_gone_and_how_to_clear_it(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    lock_id, pid = killed_holder(url)
    store = SqlSourceStore(url)
    with pytest.raises(Locked) as refused:
        store.lock("s", "me@here:1", 160.0)
    assert refused.value.gone
    assert (refused.value.lock.id, refused.value.lock.pid) == (lock_id, pid)
    assert str(refused.value) == (
        f"source 's' is locked by ci@runner:7 (lock {lock_id}, 1m ago), but that apply is gone: "
        f"process {pid} no longer runs on {socket.gethostname()} (killed, or it crashed); "
        f"clear the lock with 'astra force-unlock {lock_id} --source s'"
    )
    # as the message says: force-unlock clears it, and the next apply takes the lock
    assert run(["force-unlock", lock_id, "--source", "s", "--state", url]) == 0
    assert f"lock {lock_id} of source s cleared" in capsys.readouterr().out
    assert store.lock("s", "me@here:1", 170.0).pid == os.getpid()


def test_a_lock_whose_holder_runs_says_another_apply_is_running(tmp_path):
    store = SqlSourceStore(f"sqlite:///{tmp_path / 'state.db'}")
    held = store.lock("s", "me@here:1", 100.0)  # this very process holds it
    assert (held.host, held.pid) == (socket.gethostname(), os.getpid())
    with pytest.raises(Locked) as refused:
        store.lock("s", "you@here:2", 100.0)
    assert not refused.value.gone
    assert "another apply is running; if it is not, clear the lock with" in str(refused.value)


def test_a_reused_pid_is_not_the_holder():
    """The holder's pid now names another process (this one, started at another time): gone."""
    me = Process.this()
    assert me.started is not None
    ticks, _, clock = me.started.partition("/")
    earlier = Lock("abc", "ci@runner:7", 1.0, me.host, me.pid, f"{int(ticks) - 1}/{clock}")
    assert Locked("s", earlier).gone
    assert not Locked("s", Lock("abc", "ci@runner:7", 1.0, me.host, me.pid, me.started)).gone


@pytest.mark.parametrize(
    "lock",
    [
        Lock("abc", "ci@elsewhere:7", 1.0, "elsewhere.example", 999_999_999, "1/boot/ns"),
        Lock("abc", "ci@runner:7", 1.0),  # taken by an older astra: no process recorded
    ],
    ids=["another-host", "no-process-recorded"],
)
def test_a_holder_that_cannot_be_checked_is_taken_for_running(lock):
    refused = Locked("s", lock)
    assert not refused.gone
    assert "another apply is running" in str(refused)


def test_the_lock_keeps_its_process_through_the_state_database(tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    held = SqlSourceStore(url).lock("s", "me@here:1", 100.0)
    assert SqlSourceStore(url).read("s").lock == held
    assert Lock.from_json(held.to_json()) == held


# ---- the Slurm state folder's lock ---------------------------------------------------------------


class Clock:
    """A clock whose sleep moves it on (no real waiting)."""

    def __init__(self):
        self.now, self.slept = 0.0, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_the_slurm_lock_gives_up_after_its_timeout_naming_the_holder(tmp_path):
    holder = RunRecords(tmp_path)
    clock = Clock()
    waiter = RunRecords(tmp_path, lock_timeout=120.0, clock=clock, sleep=clock.sleep)
    # flock locks an open file: a second open in this process waits as another process would
    with holder.locked(), pytest.raises(Unreachable) as refused, waiter.locked():
        pass
    message = str(refused.value)
    assert message.startswith(f"the Slurm state folder {tmp_path} is locked: held by pid {os.getpid()} ")
    assert f"on {socket.gethostname()} (" in message and "waited 120 s" in message
    assert 120.0 <= clock.now <= 120.5 and len(clock.slept) < 300  # backs off, and stops at the deadline
    with waiter.locked():  # once released, taken at once
        pass


def test_the_slurm_lock_is_taken_once_its_holder_lets_go(tmp_path):
    clock = Clock()
    fd = os.open(tmp_path / "lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another process's hold, as far as flock knows

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        if clock.now > 1.0:
            fcntl.flock(fd, fcntl.LOCK_UN)

    waiter = RunRecords(tmp_path, lock_timeout=120.0, clock=clock, sleep=sleep)
    with waiter.locked():
        assert 1.0 < clock.now < 2.0
        assert f'"pid": {os.getpid()}' in (tmp_path / "lock").read_text()
    assert (tmp_path / "lock").read_text() == ""  # released: no holder recorded
    os.close(fd)
