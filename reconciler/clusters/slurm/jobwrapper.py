"""The wrapper a Slurm job that reads secrets runs on its nodes: values in, masked output out.

``python3 astra-job.py SOURCE [--boxed] COMMAND ARGS…`` (the cluster writes this module, with
``reconciler.masking``'s text before it, as ``bin/astra-job.py`` in its state folder: the
program ``program_text`` gives). The values come from one of two places, through one format
(``{"env": {VAR: value}, "files": {PATH: value}}``), and are used the same way:

- ``SOURCE`` a path: the job's secrets file (JSON, mode 0600 in a folder of the submitting
  user's alone: ``{"parts": [{"env": {VAR: base64}, "files": {PATH: base64}}, …]}``, a part per
  worker template of the job), read and removed at once, so the values are on a disk only from
  the submission to the job's start. A job of one machine runs its command so (part 0).
- ``--carry FILE``: the batch step of a job whose workers ``srun`` starts (several machines,
  worker groups, pyxis images) reads and removes the file the same way, then ``exec``-s its
  command (the ``srun``) with each value in a variable of its environment (``carried``'s names:
  ``ASTRA_JOB_SECRETS_<part>`` maps the part's variables and files to ``ASTRA_SECRET_<part>_<n>``,
  each a value in base64). ``srun`` hands the batch step's environment to every task on every
  node (its launch request goes to the nodes' slurmd, not into slurmctld's job record), so no
  value is in the script, a command line, ``--export`` or Slurm's records.
- ``--task PART``: a task (on any node, in a pyxis container too) takes part ``PART`` from its
  environment and removes every ``ASTRA_SECRET…`` variable from what its command gets.

Then it starts the command with the env values in its environment and, with secret files,
under ``bwrap``: each file a copy of mode 0400 in a tmpfs of the sandbox's own over its folder
(``--perms 0400 --ro-bind-data FD PATH``, the data read from a memory file: nothing is written to
a disk). ``--boxed``: the command is already the node's drive sandbox (``reconciler.sandbox``'s
``bwrap … --``): the files' arguments go into it, before its ``--``, so one sandbox mounts both.
It copies the command's output (stdout and stderr together) to its own, each value replaced by
``***`` (``Masker``, values split across writes too): what Slurm writes to the job's (or the
task's) ``--output`` file is masked; forwards the stop signals Slurm or astra send (TERM, INT,
USR1, USR2, HUP, QUIT, CONT) to the command's process group, and exits as the command did (a
signal's death re-raised).

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
UNCARRIED = "astra: this task was given no secrets by its job's batch step: the worker cannot start"


def _memory_file(data: bytes) -> int:
    fd = os.memfd_create("astra-secret", 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _sandboxed(files: dict[str, bytes], command: list[str], boxed: bool) -> tuple[list[str], list[int]]:
    """``bwrap`` around the command, each file bound read-only (0400) in a tmpfs over its folder;
    ``boxed``: the command is a ``bwrap … -- CMD`` already, which takes the files' arguments."""
    argv, fds = [], []
    for folder in sorted({os.path.dirname(p) for p in files}):
        argv += ["--tmpfs", folder]
    for path, data in sorted(files.items()):
        fd = _memory_file(data)
        fds.append(fd)
        argv += ["--perms", "0400", "--ro-bind-data", str(fd), path]
    if boxed:
        end = command.index("--")
        return [*command[:end], *argv, *command[end:]], fds
    return ["bwrap", "--die-with-parent", "--dev-bind", "/", "/", *argv, "--", *command], fds


Secrets = dict[str, dict[str, bytes]]


def _read_file(path: str) -> list[Secrets] | None:
    """The parts of the job's secrets file, which is removed; ``None`` when it is gone."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        os.unlink(path)
    except OSError:
        return None
    doc = json.loads(data)
    return [
        {k: {n: base64.b64decode(v) for n, v in part.get(k, {}).items()} for k in ("env", "files")}
        for part in doc["parts"]
    ]


def carried(part: int, count: int) -> list[str]:
    """The variables that carry part ``part`` of ``count`` values: its map, then each value's."""
    return [f"ASTRA_JOB_SECRETS_{part}", *(f"ASTRA_SECRET_{part}_{n}" for n in range(count))]


def _carry(parts: list[Secrets]) -> dict[bytes, bytes]:
    """The environment variables that carry ``parts`` to the tasks (``carried``'s names)."""
    out: dict[bytes, bytes] = {}
    for p, part in enumerate(parts):
        items = [(kind, k, v) for kind in ("env", "files") for k, v in part[kind].items()]
        names = carried(p, len(items))
        where: dict[str, dict[str, str]] = {"env": {}, "files": {}}
        for (kind, key, value), name in zip(items, names[1:], strict=True):
            where[kind][key] = name
            out[name.encode()] = base64.b64encode(value)
        out[names[0].encode()] = json.dumps(where).encode()
    return out


def _take(env: dict[bytes, bytes], part: int) -> Secrets | None:
    """Part ``part`` from the carried variables of ``env``, every one of which is removed."""
    where = env.get(f"ASTRA_JOB_SECRETS_{part}".encode())
    got = None
    if where is not None:
        names = json.loads(where)
        got = {
            k: {key: base64.b64decode(env[n.encode()]) for key, n in names[k].items()}
            for k in ("env", "files")
        }
    for name in [n for n in env if n.startswith(b"ASTRA_SECRET") or n.startswith(b"ASTRA_JOB_SECRETS")]:
        del env[name]
    return got


def main(argv: list[str]) -> int:
    """Run the command after the source (and ``--boxed``) with its secrets (module docstring)."""
    env = dict(os.environb)
    if argv[1] == "--task":
        secrets, rest = _take(env, int(argv[2])), argv[3:]
    else:
        path, rest = (argv[2], argv[3:]) if argv[1] == "--carry" else (argv[1], argv[2:])
        parts = _read_file(path)
        if parts is not None and argv[1] == "--carry":
            os.execvpe(rest[0], rest, {**env, **_carry(parts)})
        secrets = parts[0] if parts else None
    if secrets is None:
        print(UNCARRIED if argv[1] == "--task" else GONE, file=sys.stderr, flush=True)
        return 1
    boxed = rest[:1] == ["--boxed"]
    command: list[str] = rest[1:] if boxed else rest
    for key, value in secrets["env"].items():
        env[key.encode()] = value
    fds: list[int] = []
    if secrets["files"]:
        command, fds = _sandboxed(secrets["files"], command, boxed)
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
