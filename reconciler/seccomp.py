"""The workers' seccomp filter: a deny-list in the spirit of Docker's default profile, as the
compiled BPF program bubblewrap loads (``bwrap --seccomp FD``).

Owns: which system calls a worker may not make (``DENIED``: what escapes a sandbox or reaches
the host's kernel state: file handles, mounts, namespaces, tracing, kernel modules and kexec,
BPF, keyrings, perf, clocks, swap, reboot), the namespace flags ``clone`` may not take, and
compiling them (libseccomp, through ``pyseccomp``'s ctypes binding) into the program
(``program``) and a file descriptor holding it (``program_fd``). Every other call is allowed:
a worker is a plain training process, not a hostile one to trace call by call. A denied call
fails with ``EPERM`` (as Docker's), but ``clone3`` with ``ENOSYS``, so that the C library
falls back to ``clone``, whose flags the filter can read. A call of another architecture
(a 32-bit one on x86-64) kills the process: libseccomp's default for a foreign architecture.

Must not touch: processes (the executor passes the descriptor to bubblewrap).
"""

from __future__ import annotations

import errno
import functools
import os

__all__ = ["CLONE_NAMESPACES", "DENIED", "program", "program_fd"]

#: What a worker may not call (Docker's default profile denies these to a container without
#: the capabilities they need; a worker has none).
DENIED = (
    # file handles: open_by_handle_at opens any inode of a file system ("shocker")
    "open_by_handle_at",
    "name_to_handle_at",
    # mounts and namespaces: a view of the host's files the sandbox does not give
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "unshare",
    "setns",
    # other processes and the kernel's memory
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "userfaultfd",
    # the kernel itself
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "bpf",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    "iopl",
    "ioperm",
    "syslog",
    "acct",
    "quotactl",
    "swapon",
    "swapoff",
    "reboot",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "lookup_dcookie",
    "vhangup",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
)

#: The ``clone`` flags of new namespaces (CLONE_NEWNS … CLONE_NEWNET, CLONE_NEWTIME): a
#: ``clone`` with any of them is denied, as ``unshare`` is.
CLONE_NAMESPACES = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
    0x00000080,  # CLONE_NEWTIME
)


@functools.cache
def program() -> bytes:
    """The compiled BPF program (the host's architecture), made once."""
    import pyseccomp as seccomp

    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in DENIED:
        try:
            seccomp.resolve_syscall(seccomp.Arch.NATIVE, name)
        except ValueError:  # not a call of this architecture (iopl on arm64): nothing to deny
            continue
        rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
    for flag in CLONE_NAMESPACES:
        rules.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    with os.fdopen(os.memfd_create("astra-seccomp", os.MFD_CLOEXEC), "w+b") as out:
        rules.export_bpf(out)  # libseccomp writes to the descriptor itself
        out.seek(0)
        return out.read()


def program_fd() -> int:
    """A new file descriptor holding ``program()`` from its start (a memfd: bubblewrap reads it
    to its end, so each sandbox gets one of its own); the caller closes it."""
    fd = os.memfd_create("astra-seccomp", os.MFD_CLOEXEC)
    os.write(fd, program())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
