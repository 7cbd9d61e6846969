"""The workers' seccomp filter (``reconciler.seccomp``), loaded by bubblewrap for real.

Each denied call, made with arguments the kernel would refuse anyway (nothing happens if the
filter let one through), fails with EPERM under the filter, as does a ``clone`` into a new
user namespace; ``clone3`` says ENOSYS, so a process still starts others (the C library falls
back to ``clone``), and what a training process does (files, threads, sockets) works.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess

import pytest

from reconciler.seccomp import DENIED, program, program_fd

#: Each call with zeros (or -1) for its arguments, in a process under the filter.
PROBE = """\
import ctypes, os, socket, subprocess, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
for name, number in (line.split() for line in sys.argv[1].split(",")):
    ctypes.set_errno(0)
    done = libc.syscall(int(number), -1, 0, 0, 0, 0, 0)
    print(name, done, ctypes.get_errno())
print("clone-newuser", libc.syscall(int(sys.argv[2]), 0x10000000 | 17, 0, 0, 0, 0) , ctypes.get_errno())
threading.Thread(target=print, args=("thread",)).start()
print(subprocess.run(["echo", "child"], capture_output=True, text=True).stdout.strip())
socket.socket().close()
print("socket")
"""


def _number(name: str) -> int | None:
    import pyseccomp

    try:
        return int(pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name))
    except ValueError:
        return None


def test_the_filter_denies_each_listed_call_and_lets_a_process_work():
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.fail("bubblewrap is not installed: run scripts/sandbox-local-up.sh (task sandbox:up)")
    calls = {name: n for name in DENIED if (n := _number(name)) is not None}
    assert {"open_by_handle_at", "mount", "umount2", "pivot_root", "unshare", "setns", "ptrace"} <= set(calls)
    assert {"kexec_load", "init_module", "bpf", "keyctl", "add_key", "perf_event_open"} <= set(calls)
    listed = ",".join(f"{name} {n}" for name, n in calls.items())
    fd = program_fd()
    user = ["--unshare-user"] if os.geteuid() != 0 else []
    argv = [bwrap, *user, "--dev-bind", "/", "/", "--seccomp", str(fd), "--", "/usr/bin/python3", "-c", PROBE]
    try:
        done = subprocess.run(
            [*argv, listed, str(_number("clone"))],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            pass_fds=(fd,),
        )
    finally:
        os.close(fd)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    said = {name: code for name, _, code in (line.split() for line in lines[: len(calls) + 1])}
    assert said == {name: str(errno.EPERM) for name in [*calls, "clone-newuser"]}
    assert sorted(lines[len(calls) + 1 :]) == ["child", "socket", "thread"]


def test_the_program_is_made_once_and_each_descriptor_holds_it_from_its_start():
    first, second = program_fd(), program_fd()
    try:
        assert os.read(first, 1 << 16) == program() == os.read(second, 1 << 16)
        assert len(program()) % 8 == 0  # whole BPF instructions (8 bytes each)
    finally:
        os.close(first)
        os.close(second)
