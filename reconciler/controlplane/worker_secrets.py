"""What a worker of the local executor gets of its run's secrets, and how, never in a command line.

Owns: ``gather`` (the values a worker template reads: its env's ``{secret: NAME}`` and its
``secret_files``, read as the worker starts, so a secret set again reaches the next worker
started and stops none running; or why the worker cannot start: a secret gone since the
scheduler let it start, a NUL byte in an env value) and ``Given`` (those values, and how they
reach the process):

* without a sandbox: env values in the process's environment (readable by its user alone, as
  ``/proc/PID/environ`` is); secret files need the sandbox (the worker ends, in words);
* in the sandbox: bubblewrap reads its ``--setenv NAME VALUE`` and ``--perms MODE
  --ro-bind-data FD PATH`` from a memory file (``--args FD``, ``memfd_create``), never from its
  command line (which ``ps`` shows every user): each file is a copy in the sandbox's own tmpfs,
  mounted read-only at its ``mount_path``; nothing is written to a disk. Its mode is 0400, the
  worker's own; under a root server bubblewrap writes the copy as root and the worker then runs
  as the worker user (``sandbox.WorkerUser``), which bubblewrap cannot give a file to: the copy
  is 0444 there, which no one else reads, since that tmpfs is seen by the sandbox's processes
  alone, all of them the worker's.

The values are also what the worker's log is masked with (``masking``).

Must not touch: the store (values come through the executor's ``secrets`` callable), the
scheduler, the log (``masking``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from ..runspec.models import TaskTemplate
from ..runspec.secrets import SECRET_FILE_MODE, SecretRef

__all__ = ["FILES_NEED_SANDBOX", "Given", "gather"]

FILES_NEED_SANDBOX = "Secret files need a sandbox: install bubblewrap"
#: A secret file's mode where the worker runs as another user than bubblewrap (a root server's).
SWITCHED_FILE_MODE = 0o444


@dataclass
class Given:
    """A worker's secrets: env values by variable, files by mount path, each as bytes."""

    env: dict[str, bytes] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    #: the memory files ``sandbox_args`` made, for the process to inherit; ``close`` closes them
    fds: list[int] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.env or self.files)

    @property
    def values(self) -> list[bytes]:
        return [*self.env.values(), *self.files.values()]

    def sandbox_args(self, switched: bool = False) -> int:
        """A memory file of bubblewrap's NUL-separated arguments for these secrets (``--args``),
        and one per file for its data (mode 0400; 0444 where the worker is ``switched`` to
        another user than bubblewrap's, see the module docstring); the caller passes the
        returned descriptor and ``self.fds`` to the process, then closes them (``close``)."""
        self.close()
        words: list[bytes] = []
        for key, value in sorted(self.env.items()):
            words += [b"--setenv", key.encode(), value]
        for path, value in sorted(self.files.items()):
            fd = _memory_file("secret", value)
            self.fds.append(fd)
            mode = SWITCHED_FILE_MODE if switched else SECRET_FILE_MODE
            words += [b"--perms", f"{mode:04o}".encode(), b"--ro-bind-data", str(fd).encode(), path.encode()]
        fd = _memory_file("args", b"".join(w + b"\0" for w in words))
        self.fds.append(fd)
        return fd

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []


def _memory_file(name: str, data: bytes) -> int:
    fd = os.memfd_create(f"astra-{name}", os.MFD_CLOEXEC)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def gather(
    template: TaskTemplate, workspace: str, read: Callable[[str, str], bytes | None], sandboxed: bool
) -> Given | str:
    """The secrets ``template``'s worker reads in ``workspace`` (``ORG/WORKSPACE``), each read now
    through ``read(workspace, name)``; or why it cannot start, in words that hold no value."""
    given = Given()
    for key, value in (template.env or {}).items():
        if isinstance(value, SecretRef):
            found = read(workspace, value.secret)
            if found is None:
                return f"secret {value.secret!r} does not exist (deleted as the worker started)"
            if b"\0" in found:
                return (
                    f"secret {value.secret!r} holds a NUL byte, which an environment variable "
                    f"cannot: give it as a secret file (secret_files)"
                )
            given.env[key] = found
    for f in template.secret_files or ():
        if not sandboxed:
            return FILES_NEED_SANDBOX
        found = read(workspace, f.name)
        if found is None:
            return f"secret {f.name!r} does not exist (deleted as the worker started)"
        given.files[f.mount_path] = found
    return given
