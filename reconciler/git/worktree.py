"""A source's folders in a local git working tree: their commit, whether they are dirty, and
an older commit's tree (a rollback).

``Probe(paths)`` starts the git commands at once and ``result()`` collects them, so that they
run while the files load: the ``Revision`` of the working tree (the branch, ``HEAD``, its
subject and author; ``dirty`` when ``git status`` finds any change under the source's folders,
untracked files included), or ``None`` when the folders are in no repository. A detached ``HEAD``
(as CI checks a pull request out) takes its ref from ``GITHUB_HEAD_REF``, ``GITHUB_REF_NAME`` or
``CI_COMMIT_REF_NAME`` when set.

``checkout_commit(paths, rev, home)`` writes the tree of ``rev`` (any revision git reads of the
repository the folders are in) to a snapshot under ``home`` and answers the ``Checkout`` that
loads the same folders as of that commit, shown by the names given.

Must not touch: the load, the state; the working tree (read only).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from .checkout import Checkout
from .gitcli import Git, GitError, SourceError, _environment
from .revision import COMMIT_FORMAT, Revision, parse_commit
from .snapshot import Snapshot

__all__ = ["Probe", "checkout_commit", "common_folder", "worktree_revision"]

_CI_REFS = ("GITHUB_HEAD_REF", "GITHUB_REF_NAME", "CI_COMMIT_REF_NAME")


def common_folder(paths: Sequence[str | os.PathLike[str]]) -> Path:
    folders = [Path(p).resolve() for p in paths] or [Path.cwd()]
    folders = [p if p.is_dir() else p.parent for p in folders]
    return Path(os.path.commonpath([str(p) for p in folders]))


class Probe:
    """The working tree's revision, read by git commands started at once (see the module docstring)."""

    def __init__(self, paths: Sequence[str | os.PathLike[str]]):
        self.paths = [os.fspath(p) for p in paths]
        self.folder = common_folder(self.paths)
        env = _environment(None, None)
        absolute = [os.path.abspath(p) for p in self.paths] or [str(self.folder)]
        self._procs: list[subprocess.Popen[bytes]] = []
        try:
            for args in (
                ["rev-parse", "--show-toplevel"],
                ["symbolic-ref", "-q", "--short", "HEAD"],
                ["log", "-1", f"--format={COMMIT_FORMAT}"],
                ["status", "--porcelain", "-z", "--", *absolute],
            ):
                self._procs.append(
                    subprocess.Popen(
                        ["git", *args],
                        cwd=str(self.folder),
                        env=env,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL,
                    )
                )
        except OSError:  # no git here: the folders are read as in no repository
            self.close()

    def close(self) -> None:
        for p in self._procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        self._procs = []

    def result(self) -> tuple[Revision | None, str | None]:
        """The working tree's revision and its root (``None, None``: in no repository)."""
        if not self._procs:
            return None, None
        try:
            outs = [p.communicate(timeout=60)[0].decode("utf-8", "replace") for p in self._procs]
            codes = [p.returncode for p in self._procs]
        except subprocess.TimeoutExpired:
            self.close()
            return None, None
        top, branch, log, status = outs
        if codes[0] != 0 or codes[2] != 0 or not log.strip():
            return None, None  # no repository, or one without a commit yet
        ref = branch.strip() or next((os.environ[v] for v in _CI_REFS if os.environ.get(v)), None)
        return parse_commit(log, ref, dirty=bool(status.strip("\0\n"))), top.strip()


def worktree_revision(paths: Sequence[str | os.PathLike[str]]) -> Revision | None:
    """The revision of the working tree the folders are in (``None``: in no repository)."""
    return Probe(paths).result()[0]


def checkout_commit(paths: Sequence[str], rev: str, home: Path) -> Checkout:
    """The folders as of commit ``rev`` of their repository, written out under ``home`` (see the
    module docstring); ``SourceError`` when they are in no repository or it has no such commit."""
    folder = common_folder(paths)
    here = Git(None, cwd=str(folder))
    try:
        top = here.text("rev-parse", "--show-toplevel")
        git_dir = here.text("rev-parse", "--absolute-git-dir")
    except GitError as exc:
        raise SourceError(f"--revision needs the files in a git repository: {folder} is in none") from exc
    git = Git(git_dir)
    try:
        commit = git.text("rev-parse", "--verify", "-q", f"{rev}^{{commit}}")
    except GitError as exc:
        raise SourceError(f"no commit {rev} in the repository at {top}") from exc
    try:
        branch = here.text("symbolic-ref", "-q", "--short", "HEAD") or None
    except GitError:
        branch = None
    revision = parse_commit(git.text("log", "-1", f"--format={COMMIT_FORMAT}", commit), branch)
    key = hashlib.sha256(top.encode()).hexdigest()[:16]
    snapshot = Snapshot(home / "sources" / f"{Path(top).name}-{key}-revision", git)
    snapshot.update(commit)
    real = []
    for p in paths:
        inside = os.path.relpath(os.path.abspath(p), top)
        if inside.startswith(".."):
            raise SourceError(f"{p} is outside the repository at {top}")
        target = snapshot.tree / inside if inside != "." else snapshot.tree
        if not target.exists():
            raise SourceError(f"{p} is not in commit {commit[:12]}")
        real.append(str(target))
    return Checkout(tuple(real), tuple(paths), revision.as_rollback(), top, top)
