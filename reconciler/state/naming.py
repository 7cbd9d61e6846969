"""Choosing a source's store and naming things: the source, the commit, who holds a lock.

Owns: ``open_store`` (``--state`` wins, else the cluster's own, else SQLite at
``$ASTRA_HOME/state.db``, ``reconciler.home``), ``default_source_name`` (the git remote URL and
the folder's path in the repo, ``https://github.com/acme/runs.git//examples``; a remote that is a
folder on this machine (a clone of a local checkout) is that folder's path, joined plainly:
``/src/runs/examples``; else the folder's absolute path), ``git_commit``, ``owner`` and
``person`` (an owner as a person reads it, without the pid). Must not touch: any store's storage.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..home import astra_home
from .types import KeepsSources, SourceStore

__all__ = ["default_source_name", "default_state_url", "git_commit", "open_store", "owner", "person"]


def default_state_url(environ: Mapping[str, str] | None = None) -> str:
    """SQLite at ``state.db`` in astra's home (``reconciler.home.astra_home``)."""
    return f"sqlite:///{astra_home(environ) / 'state.db'}"


def open_store(state: str | None, cluster: Any = None) -> SourceStore:
    """The store for ``--state`` (which wins), else the cluster's own, else the default SQLite."""
    if not state and isinstance(cluster, KeepsSources):
        kept = cluster.source_store()
        if kept is not None:
            return kept
    from .sql import SqlSourceStore  # only here: sqlalchemy is no cost of a cluster that keeps sources

    return SqlSourceStore(state or default_state_url())


def _git(folder: Path, *args: str) -> str | None:
    import subprocess

    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    out = done.stdout.strip()
    return out if done.returncode == 0 and out else None


def _folder_of(paths: Sequence[str | os.PathLike[str]]) -> Path:
    folders = [Path(p).resolve() for p in paths] or [Path.cwd()]
    folders = [p if p.is_dir() else p.parent for p in folders]
    return Path(os.path.commonpath([str(p) for p in folders]))


def default_source_name(paths: Sequence[str | os.PathLike[str]]) -> str:
    """The git remote URL and the folder's path in the repo, else the folder's absolute path."""
    folder = _folder_of(paths)
    top = _git(folder, "rev-parse", "--show-toplevel")
    remote = _git(folder, "config", "--get", "remote.origin.url") if top else None
    if top and remote:
        rel = os.path.relpath(folder, Path(top).resolve())
        rel = "" if rel == "." else Path(rel).as_posix()
        local = _local_remote(remote, Path(top))
        if local is not None:  # the same folder of the repo it was cloned from: a path, no "//"
            return (local / rel).as_posix() if rel else local.as_posix()
        return f"{remote}//{rel}".rstrip("/")
    return str(folder)


def _local_remote(remote: str, top: Path) -> Path | None:
    """The folder a remote names when it is one on this machine (a path, or ``file://``), else
    ``None`` (a URL, or ``host:path`` as ssh's)."""
    if remote.startswith("file://"):
        return Path(remote.removeprefix("file://")).resolve()
    if "://" in remote or (":" in remote.split("/", 1)[0] and not remote.startswith(("/", "."))):
        return None
    return (top / remote).resolve()


def git_commit(paths: Iterable[str | os.PathLike[str]]) -> str | None:
    """The commit the files are at (``-dirty`` when the work tree differs), if they are in git."""
    folder = _folder_of(list(paths))
    head = _git(folder, "rev-parse", "HEAD")
    if head is None:
        return None
    dirty = _git(folder, "status", "--porcelain", "--", ".")
    return f"{head}-dirty" if dirty else head


def owner() -> str:
    """``user@host:pid``: who holds a lock, who applied."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (ImportError, KeyError, OSError):  # no user name here (no pwd module, no passwd entry)
        user = "unknown"
    return f"{user}@{socket.gethostname()}:{os.getpid()}"


#: ``user@host:pid``, as ``owner`` names who applied or holds a lock.
_OWNER = re.compile(r"^(?P<who>[^@\s]+@[^:\s]+):(?P<pid>\d+)$")


def person(who: str | None) -> str:
    """Who applied, as a person reads it: ``root@vm`` of ``root@vm:10748`` (the pid named the
    process that held the lock while it applied: gone once it ended), any other name as it is;
    ``-`` for none. What is stored keeps the pid (the lock's owner is the same word)."""
    if not who:
        return "-"
    found = _OWNER.match(who)
    return found["who"] if found else who
