"""A commit's tree, written out read-only for the load: never a working copy.

``Snapshot(folder, git).update(commit)`` makes ``folder/tree`` hold exactly the files of
``commit`` (regular files only; each written read-only, 0444 or 0555): the first time every
file, later only what ``git diff-tree`` says changed between the commit it held and this one, so
an unchanged file keeps its inode and times and the load's stat-hashes (``reconciler.hashes``)
know it without reading it. Symbolic links and submodules are not written (a link could point
outside the repository): a run spec is a file of the repository. A commit holding a file
``MOST_FOLDERS`` folders deep is refused, in words, before anything is written.

An update says it is under way in ``folder/tree.commit`` (``updating OLD NEW``) before it writes
anything; one found interrupted so is not trusted: the tree is written again whole. Updates are
serialised by an exclusive ``flock`` of ``folder/lock`` (another process updating the same cache
waits).

Must not touch: the cache's repository (``remote``), anything outside ``folder``.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..atomic import write_atomically
from .gitcli import EMPTY_TREE, Git, GitError

__all__ = ["Snapshot"]

_REGULAR = ("100644", "100755")
#: A commit with a file this many folders deep is refused (git has no limit; writing, walking
#: and removing such a tree recurses once a folder in Python's ``pathlib`` and ``shutil``).
MOST_FOLDERS = 256


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


class Snapshot:
    """The tree of one commit under ``folder/tree`` (see the module docstring)."""

    def __init__(self, folder: Path, git: Git):
        self.folder = folder
        self.tree = folder / "tree"
        self.git = git
        self._marker = folder / "tree.commit"

    def held(self) -> str | None:
        """The commit the tree holds whole (``None``: none, or an update was interrupted)."""
        try:
            text = self._marker.read_text(encoding="utf-8").split()
        except OSError:
            return None
        return text[0] if len(text) == 1 else None

    def update(self, commit: str) -> int:
        """Make the tree hold ``commit``; how many files were written or removed."""
        with _locked(self.folder / "lock"):
            old = self.held()
            if old == commit and self.tree.is_dir():
                return 0
            if old is None or not self.tree.is_dir():
                if self.tree.exists():
                    _writable(self.tree)
                    shutil.rmtree(self.tree)
                old = EMPTY_TREE
            write_atomically(self._marker, f"updating {old} {commit}\n")
            done = self._write(old, commit)
            if not write_atomically(self._marker, f"{commit}\n"):
                raise GitError(f"cannot write {self._marker}")
            return done

    def _write(self, old: str, new: str) -> int:
        raw = self.git.run("diff-tree", "-r", "-z", "--no-renames", "--raw", old, new)
        fields = raw.split(b"\0")
        wanted: list[tuple[str, str, str]] = []  # (path, sha, mode)
        gone: list[str] = []
        for i in range(0, len(fields) - 1, 2):
            head, path = fields[i].decode(), fields[i + 1].decode("utf-8", "surrogateescape")
            if not head.startswith(":"):
                continue
            _old_mode, new_mode, _old_sha, new_sha, status = head[1:].split()
            if status == "D" or new_mode not in _REGULAR:
                gone.append(path)
            if status != "D" and new_mode in _REGULAR:
                wanted.append((path, new_sha, new_mode))
        deep = next((path for path, _, _ in wanted if path.count("/") >= MOST_FOLDERS), None)
        if deep is not None:  # refused before anything is written
            raise GitError(
                f"{deep.split('/', 1)[0]}/…/{deep.rsplit('/', 1)[-1]}: the commit holds a file "
                f"{deep.count('/')} folders deep; astra reads at most {MOST_FOLDERS - 1}: move it up"
            )
        self.tree.mkdir(parents=True, exist_ok=True)
        for path in gone:
            target = self.tree / path
            if target.is_file() or target.is_symlink():
                target.unlink()
                _prune_empty(target.parent, self.tree)
        modes = {sha: mode for _, sha, mode in wanted}
        blobs = dict(self.git.cat_files(sorted(modes)))
        for path, sha, mode in wanted:
            target = self.tree / path
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists() or target.is_symlink():
                target.unlink()
            with open(target, "xb") as f:
                f.write(blobs[sha])
            os.chmod(target, 0o555 if mode == "100755" else 0o444)
        return len(wanted) + len(gone)


def _prune_empty(folder: Path, top: Path) -> None:
    while folder != top and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def _writable(tree: Path) -> None:
    """Give the owner write access again (so that ``rmtree`` can remove read-only files)."""
    for root, dirs, files in os.walk(tree):
        for name in dirs + files:
            p = os.path.join(root, name)
            if not os.path.islink(p):
                os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR)
