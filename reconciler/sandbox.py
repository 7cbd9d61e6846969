"""Workers' sandboxes: bubblewrap (``bwrap``) command lines, for the local cluster and for Slurm.

Owns: finding a ``bwrap`` that works on this host (``find_sandbox``, ``find_node_sandbox``:
the one ``ASTRA_BWRAP`` names, else on ``PATH``, tried once with a trivial command, so that a
host whose user namespaces are off is found out once, not by every worker), how a drive is
mounted (``Mount``, ``mount_args``: read-only for ``mode: ReadOnly``), and the two shapes of
sandbox built from those pieces:

``Sandbox.argv``: the local cluster's worker (the server and its workers share a host, so the
worker is kept out of astra's secrets). What the worker sees (docs/sandbox.md):

* a root of its own (a tmpfs, no file of it kept): the host's ``/usr`` read-only, with the
  ``/bin``, ``/lib``, ``/lib64``, ``/sbin`` links of a merged-/usr host (or those folders,
  read-only, where they are folders), ``/etc`` read-only;
* ``/dev`` (a minimal one: null, zero, random, urandom, tty, shm), a ``/proc`` of its own PID
  namespace (only the sandbox's processes: not the server's, not another worker's), a private
  ``/tmp``;
* the command's working folder (the server's, as without a sandbox) read-write, at its own path;
  astra's home (database, token, logs) hidden under an empty folder when it lies inside it;
* the installation of each folder of ``PATH`` outside ``/usr`` and of the command itself
  (``installation``: the folder above a ``bin``, as a virtualenv's or pyenv's root; the folder
  alone where the one above is ``/``, the home folder, or holds astra's home or the working
  folder), read-only, so that a command found on the host is found and runs inside;
* each drive at its ``mount_path``: read-only for ``mode: ReadOnly`` (a write fails with EROFS),
  read-write else.

Nothing else of the host: not the user's home (but what the working folder holds), not
``/root``, ``/var``, ``/run``; the network is the host's (a gang's workers meet on loopback).

``NodeSandbox.shell``: a Slurm job's wrapper (docs/slurm.md, "Drives"), which only adds the
drives to the node's own view: a root of its own where each top-level entry of the node's is
bound as it is (listed on the node when the job starts: a login node's root may differ), the
node's ``/dev`` (its GPUs) and ``/proc``, the job's environment and working folder, and each
drive at its ``mount_path``. No namespace but the mount one (and a user one when not root): the
ranks of a job on one node still see each other, as NCCL and MPI need.

Must not touch: processes (the executor, or Slurm's job, starts the command line; only the
probes run ``bwrap``), the store, the scheduler, Slurm.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from reconciler.runspec.vocabulary import DRIVES_NEED_SANDBOX

__all__ = [
    "BWRAP_VARIABLE",
    "NODE_BOX",
    "NO_SANDBOX_REASON",
    "Mount",
    "NodeSandbox",
    "Sandbox",
    "find_node_sandbox",
    "find_sandbox",
    "installation",
    "mount_args",
    "no_sandbox_warning",
]

#: The environment variable naming the ``bwrap`` to use (a path, or a command on ``PATH``);
#: empty: no sandbox. The seam the tests use to run a server on a host without bubblewrap.
BWRAP_VARIABLE = "ASTRA_BWRAP"
#: Why a run with drives waits when no sandbox can be made (CONTRACT §7; the vocabulary's words).
NO_SANDBOX_REASON = DRIVES_NEED_SANDBOX

#: The links (or folders) of a merged-/usr root the sandbox makes from the host's.
_ROOT_LINKS = ("bin", "lib", "lib64", "sbin")
#: Where Debian's bubblewrap is, whatever the server's ``PATH``.
_SYSTEM_BIN = ("/usr/bin", "/bin")
#: Seconds the start-up check may take (a bwrap that hangs is no sandbox).
_CHECK_TIMEOUT = 10.0
#: What runs a command in a Slurm job's sandbox, once ``NodeSandbox.shell`` has run:
#: ``exec "${ASTRA_BOX[@]}" COMMAND ARGS…`` (a bash array: never exported to the worker).
NODE_BOX = '"${ASTRA_BOX[@]}"'


@dataclass(frozen=True, slots=True)
class Mount:
    """A drive in a worker's sandbox: the host's folder ``source`` at ``target``."""

    source: str
    target: str
    read_only: bool


def mount_args(mounts: Iterable[Mount]) -> list[str]:
    """bwrap's arguments for the drives: each one's target made in the sandbox's root (where it
    is missing), then the folder bound there, read-only (``--ro-bind``: a write fails with
    EROFS) or read-write (``--bind``)."""
    args: list[str] = []
    for m in mounts:
        args += ["--dir", m.target, "--ro-bind" if m.read_only else "--bind", m.source, m.target]
    return args


def _user_namespace(wanted: bool | None) -> list[str]:
    """``--unshare-user`` where wanted; ``None``: when this process is not root (an unprivileged
    user's bwrap needs a user namespace; root's does not)."""
    return ["--unshare-user"] if wanted or (wanted is None and os.geteuid() != 0) else []


@dataclass(frozen=True, slots=True)
class Sandbox:
    """A working ``bwrap``; ``hidden``: folders (astra's home) never shown to a worker."""

    bwrap: str
    hidden: tuple[str, ...] = ()
    #: a user namespace of its own (``--unshare-user``): what an unprivileged user needs;
    #: ``None``: when this process is not root
    user_namespace: bool | None = None

    def argv(
        self,
        command: list[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        mounts: Iterable[Mount] = (),
        found: str | None = None,
        args_fd: int | None = None,
    ) -> list[str]:
        """The command line that runs ``command`` in the sandbox, in ``cwd``, with ``env`` alone;
        ``found``: where the host found ``command[0]`` (its installation is shown read-only);
        ``args_fd``: a descriptor of more of bwrap's arguments, read last (``--args``: a worker's
        secrets, which a command line would show every user)."""
        args = [self.bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        args += _user_namespace(self.user_namespace)
        args += ["--tmpfs", "/", "--ro-bind", "/usr", "/usr"]
        for name in _ROOT_LINKS:
            host = Path("/") / name
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), str(host)]
            elif host.is_dir():
                args += ["--ro-bind", str(host), str(host)]
        args += ["--ro-bind", "/etc", "/etc", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        home = env.get("HOME")
        shown = [installation(f, cwd, home, self.hidden) for f in _path_folders(env.get("PATH", ""))]
        if found:
            shown.append(installation(str(Path(found).resolve().parent), cwd, home, self.hidden))
        for folder in dict.fromkeys(f for f in shown if f is not None):
            args += ["--ro-bind", folder, folder]
        args += ["--bind", cwd, cwd]
        for hidden in self.hidden:
            if _inside(hidden, cwd):
                args += ["--tmpfs", hidden]
        args += mount_args(mounts)
        args += ["--chdir", cwd, "--clearenv"]
        for key, value in env.items():
            args += ["--setenv", key, value]
        if args_fd is not None:
            args += ["--args", str(args_fd)]
        return [*args, "--", *command]


@dataclass(frozen=True, slots=True)
class NodeSandbox:
    """A working ``bwrap`` for a Slurm job's wrapper: the node's own view, plus the drives."""

    bwrap: str
    #: as ``Sandbox.user_namespace`` (``None``: when the submitting user, whose the job is, is not root)
    user_namespace: bool | None = None

    def shell(self, mounts: Sequence[Mount]) -> str:
        """One line of bash (it may sit in a ``bash -c``) that fills the array ``ASTRA_BOX`` with
        the command line that runs a command (``NODE_BOX`` and its words after it) on this node
        with ``mounts``: the node's top-level entries as they are (a link as the same link),
        listed when the line runs; but a drive's ``mount_path`` itself, which the drive hides."""
        start = [self.bwrap, "--die-with-parent", *_user_namespace(self.user_namespace), "--tmpfs", "/"]
        hidden = ["/proc", "/dev", *(m.target.rstrip("/") or "/" for m in mounts)]
        end = ["--dev-bind", "/dev", "/dev", "--bind", "/proc", "/proc", *mount_args(mounts)]
        return (
            f"ASTRA_BOX=({shlex.join(start)}); for astra_top in /*; do "
            f'case "$astra_top" in {"|".join(shlex.quote(h) for h in hidden)}) ;; '
            '*) if [ -L "$astra_top" ]; then ASTRA_BOX+=(--symlink "$(readlink "$astra_top")" "$astra_top"); '
            'else ASTRA_BOX+=(--bind "$astra_top" "$astra_top"); fi ;; esac; done; '
            f'ASTRA_BOX+=({shlex.join(end)} --chdir "$PWD" --); unset astra_top'
        )


def _find_bwrap(env: Mapping[str, str]) -> tuple[str | None, str]:
    """The ``bwrap`` ``ASTRA_BWRAP`` names (empty: none), else the one on ``PATH`` (or in
    ``/usr/bin``); or ``None`` and why not."""
    named = env.get(BWRAP_VARIABLE)
    wanted = "bwrap" if named is None else named
    where = os.pathsep.join([env.get("PATH", ""), *(_SYSTEM_BIN if named is None else ())])
    found = shutil.which(wanted, path=where) if wanted else None
    if found is None:
        return None, f"{BWRAP_VARIABLE} is empty" if not wanted else f"{wanted} was not found"
    return found, ""


def _probe(argv: list[str], found: str) -> str:
    """Run a sandbox's trivial command once: ``""`` when it worked, else why not (a sentence)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_CHECK_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:  # not runnable, or hung: no sandbox, said
        return f"{found} cannot run: {exc}"
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
        return (
            f"{found} failed ({said}); are unprivileged user namespaces on "
            "(sysctl kernel.unprivileged_userns_clone=1)?"
        )
    return ""


def find_sandbox(
    hidden: Iterable[str | os.PathLike[str]] = (), environ: Mapping[str, str] | None = None
) -> tuple[Sandbox | None, str]:
    """A sandbox that works here, or ``None`` and why not (a sentence for the server's start).

    ``bwrap`` is the one ``ASTRA_BWRAP`` names (empty: none), else the one on ``PATH`` (or in
    ``/usr/bin``); it is tried once (``true`` in a PID namespace), so a host whose user
    namespaces are off says so here."""
    found, why = _find_bwrap(os.environ if environ is None else environ)
    if found is None:
        return None, f"no sandbox for workers: {why}; install bubblewrap (apt-get install bubblewrap)"
    sandbox = Sandbox(found, tuple(str(Path(h).resolve()) for h in hidden))
    failed = _probe(sandbox.argv(["true"], cwd="/", env={"PATH": "/usr/bin:/bin"}), found)
    if failed:
        return None, f"no sandbox for workers: {failed}"
    return sandbox, f"workers run in a sandbox ({found}); see docs/sandbox.md for what they see"


def find_node_sandbox(environ: Mapping[str, str] | None = None) -> tuple[NodeSandbox | None, str]:
    """A Slurm job's sandbox that works on this host (the submit host: Slurm's nodes are taken
    to have the same ``bwrap``), or ``None`` and why not (words to follow "no sandbox: ").

    The same ``bwrap`` as ``find_sandbox``'s, tried once: ``NodeSandbox.shell``, then ``true``
    in it, run by bash."""
    found, why = _find_bwrap(os.environ if environ is None else environ)
    if found is None:
        return None, why
    sandbox = NodeSandbox(found, user_namespace=os.geteuid() != 0)
    failed = _probe(["bash", "-c", f"{sandbox.shell([])}; exec {NODE_BOX} true"], found)
    return (None, failed) if failed else (sandbox, "")


def no_sandbox_warning(why: str) -> str:
    """What the server says at start when no sandbox can be made."""
    return (
        f"astra server: {why}. Workers run as plain processes of your user (no isolation), and a "
        f"run with drives waits: {NO_SANDBOX_REASON}"
    )


def installation(folder: str, cwd: str, home: str | None, hidden: Iterable[str]) -> str | None:
    """The installation a folder of commands belongs to, to show read-only (``None``: none to
    show): the folder above it (``PREFIX`` of ``PREFIX/bin``: a virtualenv, pyenv's root for its
    shims, whose commands need their prefix's files), or the folder alone where the one above is
    ``/``, the home folder, or holds astra's home or the working folder. Nothing for a folder
    under ``/usr`` (shown whole), in the working folder, ``/``, or in or around astra's home."""
    real = Path(folder).resolve()
    here = str(real)
    hide = tuple(hidden)
    if here == "/" or _inside(here, "/usr") or _inside(here, cwd):
        return None
    if any(_inside(here, h) or _inside(h, here) for h in hide):
        return None
    top = str(real.parent)
    wide = top in ("/", home) or _inside(cwd, top) or any(_inside(h, top) for h in hide)
    return here if wide else top


def _inside(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies under it."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _path_folders(path: str) -> list[str]:
    """The folders of ``PATH`` that exist (absolute ones: a relative one means the working folder)."""
    return [e for e in path.split(os.pathsep) if e and os.path.isabs(e) and os.path.isdir(e)]
