"""Workers' sandboxes: bubblewrap (``bwrap``) command lines, for the local cluster and for Slurm.

Owns: finding a ``bwrap`` that works on this host (``find_sandbox``, ``find_node_sandbox``:
the one ``ASTRA_BWRAP`` names, else on ``PATH``, tried once with a trivial command, so that a
host whose user namespaces are off is found out once, not by every worker), how a drive is
mounted (``Mount``, ``mount_args``: read-only for ``mode: ReadOnly``), and the two shapes of
sandbox built from those pieces:

``Sandbox.argv``: the local cluster's worker (the server and its workers share a host, so the
worker is kept out of astra's secrets). What the worker sees (docs/sandbox.md):

* who it is: as root, the worker user (``ASTRA_WORKER_USER``, ``nobody``: ``worker_user``),
  switched to by ``setpriv`` once bwrap has made the sandbox; else the server's own user in a
  user namespace of its own. Every capability dropped (bounding set too), no new privileges,
  the seccomp filter of ``reconciler.seccomp`` (``open_by_handle_at``, ``mount``, ``unshare``…);
* a root of its own (a tmpfs of ``tmpfs_bytes``, no file of it kept): the host's ``/usr``
  read-only, with the ``/bin``, ``/lib``, ``/lib64``, ``/sbin`` links of a merged-/usr host
  (or those folders, read-only, where they are folders), ``/etc`` read-only but its password
  hashes (``/etc/shadow``, ``/etc/gshadow``: ``/dev/null`` over them);
* ``/dev`` (a minimal one: null, zero, random, urandom, tty, shm), a ``/proc`` of its own PID
  namespace (only the sandbox's processes: not the server's, not another worker's), a private
  ``/tmp`` (a tmpfs of ``tmpfs_bytes``);
* the command's working folder (its run's own, made by the executor) read-write, at its own
  path, bound by descriptor (``Opened``, ``opened``: given to the worker user as root); astra's
  home (database, token, logs) hidden under an empty folder when it lies inside it;
* the installation of each folder of ``PATH`` outside ``/usr`` and of the command itself
  (``installation``: the folder above a ``bin``, as a virtualenv's or pyenv's root; the folder
  alone where the one above is ``/``, the home folder, or holds astra's home or the working
  folder), read-only, so that a command found on the host is found and runs inside;
* each drive at its ``mount_path``: read-only for ``mode: ReadOnly`` (a write fails with EROFS),
  read-write else (given to the worker user as root), bound by descriptor: a folder swapped for
  a symbolic link since it was registered is refused (``SandboxRefused``), never followed;
* ``binds``: more of the host's files at their targets (a secret's file), read-only.

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

import errno
import os
import pwd
import shlex
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from reconciler.runspec.vocabulary import DRIVES_NEED_SANDBOX

from .seccomp import program_fd

__all__ = [
    "BWRAP_VARIABLE",
    "NODE_BOX",
    "NO_SANDBOX_REASON",
    "WORKER_USER_VARIABLE",
    "Mount",
    "NodeSandbox",
    "Opened",
    "Sandbox",
    "SandboxRefused",
    "SeccompProgram",
    "Word",
    "WorkerUser",
    "find_node_sandbox",
    "find_sandbox",
    "installation",
    "mount_args",
    "no_sandbox_warning",
    "opened",
    "worker_user",
]

#: The environment variable naming the ``bwrap`` to use (a path, or a command on ``PATH``);
#: empty: no sandbox. The seam the tests use to run a server on a host without bubblewrap.
BWRAP_VARIABLE = "ASTRA_BWRAP"
#: Why a run with drives waits when no sandbox can be made (CONTRACT §7; the vocabulary's words).
NO_SANDBOX_REASON = DRIVES_NEED_SANDBOX

#: Who a root server's workers run as (a user's name, or a number); by default ``nobody``.
WORKER_USER_VARIABLE = "ASTRA_WORKER_USER"
DEFAULT_WORKER_USER = "nobody"
#: The size of a worker's ``/`` and of its ``/tmp`` (each a tmpfs, counted in the host's memory).
DEFAULT_TMPFS_BYTES = 1 << 30
#: ``/etc``'s files a worker never reads (password hashes), hidden under ``/dev/null``.
_MASKED_ETC = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-")
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
class WorkerUser:
    """The unprivileged user a root server's workers run as (``ASTRA_WORKER_USER``)."""

    name: str
    uid: int
    gid: int


@dataclass(frozen=True, slots=True)
class Opened:
    """A folder the sandbox binds by descriptor, opened as the worker starts (``opened``):
    ``path`` is where it was found (resolved) and must still be, with no link on the way, so a
    folder swapped for a symbolic link since is refused, not followed; ``what`` names it in the
    refusal (``drive 'datasets'``); ``owner``: a uid and gid the folder is given to (through the
    descriptor, never a path) when it is not that user's: a root server's worker user, for the
    folders a worker writes."""

    path: str
    what: str
    owner: tuple[int, int] | None = None
    #: the folder bwrap enters (``--chdir``) for a worker user: it must let others in (``o+x``),
    #: bwrap, root without a capability, entering it before ``setpriv``
    enter: bool = False


@dataclass(frozen=True, slots=True)
class SeccompProgram:
    """The place of the seccomp program's descriptor in a command line (``opened`` fills it)."""


#: A word of a sandbox's command line: a word, or a descriptor ``opened`` gives as the worker starts.
Word = str | Opened | SeccompProgram


class SandboxRefused(Exception):
    """A worker cannot start in its sandbox (a drive's folder swapped or gone): the words say why."""


@dataclass(frozen=True, slots=True)
class Sandbox:
    """A working ``bwrap``; ``hidden``: folders (astra's home) never shown to a worker."""

    bwrap: str
    hidden: tuple[str, ...] = ()
    #: a user namespace of its own (``--unshare-user``): what an unprivileged user needs;
    #: ``None``: when this process is not root
    user_namespace: bool | None = None
    #: a root server's workers run as this user (``setpriv``, once bwrap has made the sandbox)
    worker: WorkerUser | None = None
    #: the ``setpriv`` that switches to ``worker``
    setpriv: str = "/usr/bin/setpriv"
    #: bytes of the tmpfs of ``/`` and of ``/tmp`` (each)
    tmpfs_bytes: int = DEFAULT_TMPFS_BYTES

    def argv(
        self,
        command: list[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        mounts: Iterable[Mount] = (),
        found: str | None = None,
        binds: Iterable[Mount] = (),
        args_fd: int | None = None,
    ) -> list[Word]:
        """The command line that runs ``command`` in the sandbox, in ``cwd``, with ``env`` alone;
        ``found``: where the host found ``command[0]`` (its installation is shown read-only);
        ``binds``: more of the host's files at their targets (read-only); ``args_fd``: a
        descriptor of more of bwrap's arguments, read last (``--args``: a worker's secrets, which
        a command line would show every user). The working folder and the drives are bound by
        descriptor (``opened``, as the worker starts).

        Over 60 lines: bubblewrap's arguments in the order bubblewrap applies them (each mount over the
        one before), which is the order a reader must check them in."""
        args: list[Word] = [
            self.bwrap,
            "--die-with-parent",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
        ]
        args += _user_namespace(self.user_namespace)
        args += ["--cap-drop", "ALL", *self._switch_caps(), "--seccomp", SeccompProgram()]
        args += ["--size", str(self.tmpfs_bytes), "--tmpfs", "/", "--ro-bind", "/usr", "/usr"]
        for name in _ROOT_LINKS:
            host = Path("/") / name
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), str(host)]
            elif host.is_dir():
                args += ["--ro-bind", str(host), str(host)]
        args += ["--ro-bind", "/etc", "/etc", *_masked_etc(), "--dev", "/dev", "--proc", "/proc"]
        args += [
            "--perms",
            "1777",
            "--size",
            str(self.tmpfs_bytes),
            "--tmpfs",
            "/tmp",
        ]  # anyone's, as a host's
        home = env.get("HOME")
        shown = [installation(f, cwd, home, self.hidden) for f in _path_folders(env.get("PATH", ""))]
        if found:
            shown.append(installation(str(Path(found).resolve().parent), cwd, home, self.hidden))
        for folder in dict.fromkeys(f for f in shown if f is not None):
            args += ["--ro-bind", folder, folder]
        owner = None if self.worker is None else (self.worker.uid, self.worker.gid)
        args += ["--dir", cwd, "--bind-fd", Opened(cwd, "the working folder", owner, owner is not None), cwd]
        for hidden in self.hidden:
            if _inside(hidden, cwd):
                args += ["--tmpfs", hidden]
        for m in mounts:
            bind = "--ro-bind-fd" if m.read_only else "--bind-fd"
            writer = None if m.read_only else owner
            args += ["--dir", m.target, bind, Opened(m.source, f"the drive at {m.target}", writer), m.target]
        for b in binds:
            args += ["--ro-bind" if b.read_only else "--bind", b.source, b.target]
        args += ["--chdir", cwd, "--clearenv"]
        for key, value in env.items():
            args += ["--setenv", key, value]
        if args_fd is not None:
            args += ["--args", str(args_fd)]
        return [*args, "--", *self._switch(), *command]

    def _switch_caps(self) -> list[str]:
        """The capabilities bwrap keeps for ``setpriv`` alone (it drops them with the uid)."""
        if self.worker is None:
            return []
        return [w for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP") for w in ("--cap-add", cap)]

    def _switch(self) -> list[str]:
        """``setpriv`` to the worker user, no capability left (none in any set), no new privileges."""
        if self.worker is None:
            return []
        u = self.worker
        return [
            self.setpriv,
            f"--reuid={u.uid}",
            f"--regid={u.gid}",
            "--clear-groups",
            "--no-new-privs",
            "--bounding-set=-all",
            "--inh-caps=-all",
            "--",
        ]


@contextmanager
def opened(argv: Sequence[Word]) -> Iterator[tuple[list[str], tuple[int, ...]]]:
    """The command line with each descriptor opened (the seccomp program, each ``Opened``
    folder), and those descriptors (to pass to the process), closed when the block ends.

    Raises ``SandboxRefused`` where an ``Opened`` folder is gone, is not a folder, or is no
    longer at its path by itself (a link on the way, or at its end: a swap)."""
    fds: list[int] = []
    words: list[str] = []
    try:
        for word in argv:
            if isinstance(word, str):
                words.append(word)
                continue
            fd = program_fd() if isinstance(word, SeccompProgram) else _open_folder(word)
            fds.append(fd)
            words.append(str(fd))
        yield words, tuple(fds)
    finally:
        for fd in fds:
            os.close(fd)


def _open_folder(folder: Opened) -> int:
    """A descriptor of ``folder.path`` (``O_PATH``), refused in words if it is not that folder."""
    try:
        fd = os.open(folder.path, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        why = "is a symbolic link" if exc.errno in (errno.ELOOP, errno.ENOTDIR) else exc.strerror
        raise SandboxRefused(f"{folder.what}: its folder {folder.path} {why}") from exc
    real = os.readlink(f"/proc/self/fd/{fd}")
    if real != folder.path:
        os.close(fd)
        raise SandboxRefused(
            f"{folder.what}: its folder {folder.path} is now {real} (a folder on its way was "
            "replaced by a symbolic link); it is not mounted"
        )
    if folder.owner is not None and (os.stat(fd).st_uid, os.stat(fd).st_gid) != folder.owner:
        os.chown(f"/proc/self/fd/{fd}", *folder.owner)  # the opened folder itself, not a path
    if folder.enter and not os.stat(fd).st_mode & stat.S_IXOTH:
        os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(os.stat(fd).st_mode) | stat.S_IXOTH)
    return fd


def _masked_etc() -> list[str]:
    """``/etc``'s password hashes hidden (``/dev/null`` over each that the host has)."""
    return [w for f in _MASKED_ETC if os.path.lexists(f) for w in ("--ro-bind", "/dev/null", f)]


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


def _probe(argv: Sequence[Word], found: str) -> str:
    """Run a sandbox's trivial command once: ``""`` when it worked, else why not (a sentence)."""
    try:
        with opened(argv) as (words, fds):
            done = subprocess.run(
                words,
                capture_output=True,
                text=True,
                timeout=_CHECK_TIMEOUT,
                check=False,
                pass_fds=fds,
                umask=0o022,
            )
    except (OSError, subprocess.TimeoutExpired, SandboxRefused) as exc:  # not runnable, or hung: said
        return f"{found} cannot run: {exc}"
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
        return (
            f"{found} failed ({said}); are unprivileged user namespaces on "
            "(sysctl kernel.unprivileged_userns_clone=1)?"
        )
    return ""


def worker_user(environ: Mapping[str, str]) -> tuple[WorkerUser | None, str]:
    """The user a root server's workers run as: ``ASTRA_WORKER_USER`` (a name or a number; by
    default ``nobody``), never root; or ``None`` and why not."""
    named = environ.get(WORKER_USER_VARIABLE) or DEFAULT_WORKER_USER
    try:
        entry = pwd.getpwuid(int(named)) if named.isdigit() else pwd.getpwnam(named)
    except (KeyError, ValueError):
        return None, (
            f"{WORKER_USER_VARIABLE}={named}: no such user on this host; make one "
            f"(useradd --system --no-create-home {named}) or name another"
        )
    if entry.pw_uid == 0:
        return None, f"{WORKER_USER_VARIABLE}={named} is root: workers must run as an unprivileged user"
    return WorkerUser(entry.pw_name, entry.pw_uid, entry.pw_gid), ""


def find_sandbox(
    hidden: Iterable[str | os.PathLike[str]] = (), environ: Mapping[str, str] | None = None
) -> tuple[Sandbox | None, str]:
    """A sandbox that works here, or ``None`` and why not (a sentence for the server's start).

    ``bwrap`` is the one ``ASTRA_BWRAP`` names (empty: none), else the one on ``PATH`` (or in
    ``/usr/bin``); it is tried once (``true`` in a PID namespace, as the worker user), so a
    host whose user namespaces are off says so here. As root, workers run as the worker user
    (``worker_user``), switched to by ``setpriv``."""
    env = os.environ if environ is None else environ
    found, why = _find_bwrap(env)
    if found is None:
        return None, f"no sandbox for workers: {why}; install bubblewrap (apt-get install bubblewrap)"
    worker, setpriv = None, ""
    if os.geteuid() == 0:
        worker, why = worker_user(env)
        setpriv = shutil.which("setpriv", path=os.pathsep.join(_SYSTEM_BIN)) or ""
        if worker is None or not setpriv:
            why = why or "setpriv was not found; install util-linux"
            return None, f"no sandbox for workers: {why}"
    sandbox = Sandbox(found, tuple(str(Path(h).resolve()) for h in hidden), worker=worker)
    if setpriv:
        sandbox = replace(sandbox, setpriv=setpriv)
    with tempfile.TemporaryDirectory(prefix="astra-probe-") as empty:
        failed = _probe(sandbox.argv(["true"], cwd=empty, env={"PATH": "/usr/bin:/bin"}), found)
    if failed:
        return None, f"no sandbox for workers: {failed}"
    who = f", as {worker.name}" if worker is not None else ""
    return sandbox, f"workers run in a sandbox ({found}{who}); see docs/sandbox.md for what they see"


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
