"""astra's local home: the one rule for where astra keeps its local files, and its locks.

Owns the rule (``astra_home``) for the folder that holds the local cluster and the local
files: the source state's default database, the load cache, the local server's token,
``server.json``, port, database and logs. Every part that needs the home asks here, so the
copies cannot disagree. In order:

1. ``$ASTRA_HOME``, when set: an explicit choice for this shell (or CI job) wins over anything
   found, as ``GIT_DIR`` wins over git's search and ``KUBECONFIG`` over ``~/.kube/config``;
2. the nearest ``.astra/`` folder upward from the working folder, as git finds ``.git``: a
   project that wants a cluster of its own makes one with ``mkdir .astra`` (but ``~/.astra``,
   the user's home folder's, is no project's: older astras kept Slurm records there);
3. the per-user home, ``$XDG_STATE_HOME/astra`` (``~/.local/state/astra``): one local cluster
   per user, whatever folder a command runs in.

Also owns ``home_lock``: a lock file in the home (``filelock``) with a timeout, whose holder
(pid, command, since when) is written beside it, so that a command that waits too long says
who holds it. ``ensure_home`` makes the home (mode 0700), saying in words why it cannot.

Must not touch: anything else under the home (callers create and read their own files). No
import beyond the standard library at import time (it is on the CLI's start-up path).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

__all__ = ["HomeError", "astra_home", "ensure_home", "home_lock", "home_origin"]

#: The folder a project makes for a cluster of its own (found upward, as ``.git`` is).
PROJECT_HOME = ".astra"


class HomeError(Exception):
    """The home cannot be made, or one of its locks cannot be taken; the message says why."""


def _upward(start: Path, user_home: Path | None) -> Path | None:
    for folder in (start, *start.parents):
        candidate = folder / PROJECT_HOME
        if folder != user_home and candidate.is_dir():
            return candidate
    return None


def _per_user(env: Mapping[str, str]) -> Path:
    state = env.get("XDG_STATE_HOME")
    if state and os.path.isabs(state):  # the XDG spec: a relative value is to be ignored
        return Path(state) / "astra"
    base = env.get("HOME") or os.path.expanduser("~")
    return Path(base) / ".local" / "state" / "astra"


def astra_home(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path:
    """``$ASTRA_HOME``, else the nearest ``.astra/`` upward, else the per-user home; absolute."""
    return _find(os.environ if environ is None else environ, cwd)[0]


def home_origin(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> str:
    """Why the home is where it is, in words: ``ASTRA_HOME``, ``found upward``, ``per user``."""
    return _find(os.environ if environ is None else environ, cwd)[1]


def _find(env: Mapping[str, str], cwd: Path | None) -> tuple[Path, str]:
    given = env.get("ASTRA_HOME")
    if given:
        return Path(given).resolve(), "ASTRA_HOME"
    here = (cwd or Path.cwd()).resolve()
    user = env.get("HOME") or os.path.expanduser("~")
    found = _upward(here, Path(user).resolve() if user else None)
    if found is not None:
        return found, "found upward"
    return _per_user(env).resolve(), "per user"


def ensure_home(home: Path) -> Path:
    """Make ``home`` (and its parents) if needed, readable by its user alone; ``HomeError`` in
    words when it cannot be made (``ASTRA_HOME=/proc/nope``)."""
    try:
        home.mkdir(parents=True, exist_ok=True)
        if home.stat().st_mode & 0o077:
            home.chmod(0o700)  # a home made by an older astra (0755) is closed too
    except OSError as exc:
        why = f"{exc.strerror or exc} (set ASTRA_HOME to a folder you can write)"
        raise HomeError(f"cannot use {home} as astra's home: {why}") from exc
    return home


def _holder(path: Path) -> str:
    try:
        data = json.loads(path.read_text())
        since = time.strftime("%H:%M:%S", time.localtime(float(data["since"])))
        return f"pid {int(data['pid'])} ('{data['command']}', since {since})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


@contextmanager
def home_lock(home: Path, name: str, *, timeout: float, purpose: str) -> Iterator[None]:
    """Hold ``HOME/NAME.lock`` (``filelock``: released when the process ends, however it ends).

    Waits up to ``timeout`` seconds (0: not at all), then ``HomeError`` saying who holds it and
    what for. While held, ``HOME/NAME.lock.json`` says who holds it: pid, command, since when.
    """
    from filelock import FileLock, Timeout

    ensure_home(home)
    path = home / f"{name}.lock"
    lock = FileLock(str(path), timeout=timeout)
    holder_file = home / f"{name}.lock.json"
    try:
        lock.acquire()
    except Timeout:
        waited = f"waited {timeout:g} s" if timeout else "it is taken"
        raise HomeError(f"cannot {purpose}: {path} is held by {_holder(holder_file)} ({waited})") from None
    except OSError as exc:
        raise HomeError(f"cannot {purpose}: cannot lock {path}: {exc.strerror or exc}") from exc
    try:
        command = " ".join(["astra", *sys.argv[1:]])[:200]
        holder_file.write_text(json.dumps({"pid": os.getpid(), "command": command, "since": time.time()}))
        yield
    finally:
        lock.release()
