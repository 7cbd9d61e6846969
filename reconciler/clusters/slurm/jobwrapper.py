"""The wrapper a Slurm job that reads secrets runs on its node: values in, masked output out.

``python3 astra-job.py SECRETS_FILE COMMAND ARGS…`` (the cluster writes this module, with
``reconciler.masking``'s text before it, as ``bin/astra-job.py`` in its state folder: the
program ``program_text`` gives). It:

1. reads the job's secrets file (JSON, mode 0600 in a folder of the submitting user's alone:
   ``{"env": {VAR: base64}, "files": {PATH: base64}}``) and removes it at once, so the values
   are on a disk only from the submission to the job's start;
2. starts the command with the env values in its environment (never a command line, never
   ``sbatch``'s environment) and, with secret files, under ``bwrap``: each file a copy of
   mode 0400 in a tmpfs of the sandbox's own over its folder (``--perms 0400 --ro-bind-data FD
   PATH``, the data read from a memory file: nothing is written to a disk);
3. copies the command's output (stdout and stderr together) to its own, each value replaced by
   ``***`` (``Masker``, values split across writes too): what Slurm writes to the job's
   ``--output`` file is masked;
4. forwards the stop signals Slurm or astra send (TERM, INT, USR1, USR2, HUP, QUIT, CONT) to
   the command's process group, and exits as the command did (a signal's death re-raised).

Standard library only, and nothing of astra's imported (the node need not have astra).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys

with contextlib.suppress(ImportError):  # on a node without astra: masking's text is above this
    from reconciler.masking import Masker

#: The signals forwarded to the worker.
FORWARDED = ("SIGTERM", "SIGINT", "SIGUSR1", "SIGUSR2", "SIGHUP", "SIGQUIT", "SIGCONT")
GONE = (
    "astra: this job's secrets file is gone (an earlier start of the same job read it): "
    "the worker cannot start; astra resubmits it with a new one"
)


def _memory_file(data: bytes) -> int:
    fd = os.memfd_create("astra-secret", 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _sandboxed(files: dict[str, bytes], command: list[str]) -> tuple[list[str], list[int]]:
    """``bwrap`` around the command, each file bound read-only (0400) in a tmpfs over its folder."""
    argv, fds = ["bwrap", "--die-with-parent", "--dev-bind", "/", "/"], []
    for folder in sorted({os.path.dirname(p) for p in files}):
        argv += ["--tmpfs", folder]
    for path, data in sorted(files.items()):
        fd = _memory_file(data)
        fds.append(fd)
        argv += ["--perms", "0400", "--ro-bind-data", str(fd), path]
    return [*argv, "--", *command], fds


def _read(path: str) -> dict[str, dict[str, bytes]] | None:
    try:
        with open(path, "rb") as f:
            data = f.read()
        os.unlink(path)
    except OSError:
        return None
    doc = json.loads(data)
    return {k: {n: base64.b64decode(v) for n, v in doc.get(k, {}).items()} for k in ("env", "files")}


def main(argv: list[str]) -> int:
    """Run the command of ``argv[2:]`` with the secrets of file ``argv[1]`` (module docstring)."""
    secrets = _read(argv[1])
    if secrets is None:
        print(GONE, file=sys.stderr, flush=True)
        return 1
    env = dict(os.environb)
    for key, value in secrets["env"].items():
        env[key.encode()] = value
    command: list[str] = argv[2:]
    fds: list[int] = []
    if secrets["files"]:
        command, fds = _sandboxed(secrets["files"], command)
    masker = Masker([*secrets["env"].values(), *secrets["files"].values()])
    read, write = os.pipe()
    proc = subprocess.Popen(
        command, env=env, stdout=write, stderr=write, pass_fds=fds, start_new_session=True
    )
    os.close(write)
    for fd in fds:
        os.close(fd)

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signum)

    for name in FORWARDED:
        signal.signal(getattr(signal, name), forward)
    while True:
        try:
            data = os.read(read, 65536)
        except InterruptedError:
            continue
        if not data:
            break
        os.write(1, masker.feed(data))
    os.write(1, masker.end())
    code = proc.wait()
    if code < 0:  # killed by a signal: die of it too, so Slurm says what it was
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


def program_text(masking: str, wrapper: str) -> str:
    """The node's program: ``masking``'s text (``reconciler.masking``), then this module's
    (``wrapper``), each without its ``from __future__`` line, and the call of ``main``."""
    parts = [
        "\n".join(line for line in text.splitlines() if not line.startswith("from __future__"))
        for text in (masking, wrapper)
    ]
    return (
        "#!/usr/bin/env python3\n"
        + "\n\n".join(parts)
        + '\n\nif __name__ == "__main__":\n    sys.exit(main(sys.argv))\n'
    )
