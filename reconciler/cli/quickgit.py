"""The git half of ``cli.quickplan``: what the revision of a plan of folders in a git working tree
was decided by, kept as the ``lstat`` of a few files, so that it is checked again with no git
process (one costs 6 ms or more; the whole quick plan about 120 ms).

A plan of a working tree says its revision (``sources.worktree.Probe``): the branch
(``git symbolic-ref --short HEAD``), the commit ``HEAD`` is at with its subject and author
(``git log -1``), the top (``git rev-parse --show-toplevel``), and ``dirty`` when
``git status --porcelain -- FOLDERS`` says anything: a status of the spec folders only, untracked
files counted, ignored ones not. Each of these can move while the spec files' stats do not, and
each is decided by files read here by ``lstat`` alone:

* **the repository**: the ``.git`` folder found walking up from each folder and from their
  common folder (the probe's working folder), all the same one, on the same device all the way
  (git stops at a file system's edge) and owned by this user (git's ``safe.directory``); the
  plan's top must be its parent (``core.worktree`` elsewhere: refused);
* **the commit and the branch**: ``HEAD``, the branch's file under ``refs/heads``,
  ``packed-refs``, the files ``--short`` would find the branch's name ambiguous with
  (``refs/tags/B``, ``refs/remotes/B``...), ``refs/replace`` and ``info/grafts`` (they change
  what ``git log`` shows of a commit). When recording, the commit and branch read from these
  files must be the plan's;
* **dirty**: the index (git's stat cache of the tracked files, and the staged tree), every
  entry under the folders, hidden and ignored ones too (a file edited, added, removed or made
  executable; directories by their own stat), the ``.gitignore`` and ``.gitattributes`` of the
  folders' parents up to the top, ``info/exclude``, ``info/attributes``,
  ``info/sparse-checkout``, the configuration files (the repository's, ``~/.gitconfig``,
  ``XDG_CONFIG_HOME/git/{config,ignore,attributes}``, ``/etc/gitconfig``, ``/etc/gitattributes``)
  and the files ``core.excludesFile`` and ``core.attributesFile`` name (asked of git when
  recording, where a git process costs nothing that matters). A file outside the folders does
  not make the plan dirty (the status is of the folders), so it is not looked at.

Any of them changed (even as git would call clean: a file touched, the index written again) and
the full plan answers and records again. Refused, so always planned in full: a ``.git`` file (a
linked worktree, a submodule), a ``.git`` under the folders (a nested repository), a reftable
repository, a configuration file that includes another (``include``/``includeIf``), a
configuration file git reads that is not one of those above (a git built with another system
configuration: seen when recording; one that appears there later is not).

Recorded only when no entry watched changed within ``hashes.RACY_NS`` before the plan started:
anything written while the plan ran (when git read it), or after, then has a stat other than the
one recorded, even on a coarse clock. The index that the plan's own ``git status`` wrote again
is refused by this rule: such a plan is recorded by the next one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Sequence
from typing import Any

from .. import hashes
from ..hashes import stat_key

__all__ = ["recorded", "repository", "unchanged"]

#: Files of the ``.git`` folder that decide the revision or the status (absent ones too).
_GIT_FILES = (
    "HEAD",
    "index",
    "packed-refs",
    "config",
    "config.worktree",
    "commondir",
    "reftable",
    "shallow",
    "info/exclude",
    "info/attributes",
    "info/grafts",
    "info/sparse-checkout",
    "refs/replace",
)
#: Where ``git rev-parse``'s short names look for a name (``refs.c``'s ``ref_rev_parse_rules``).
_SHORT_RULES = ("%s", "refs/%s", "refs/tags/%s", "refs/heads/%s", "refs/remotes/%s", "refs/remotes/%s/HEAD")


def repository(paths: Sequence[str]) -> str | None:
    """The ``.git`` folder git finds for the folders (``None``: none); ``ValueError`` when it
    might find another one, or one refused (see the module docstring)."""
    folders = []
    for p in paths:
        real = os.path.realpath(p)
        folders.append(real if os.path.isdir(real) else os.path.dirname(real))
    found = {_above(f) for f in (*folders, os.path.commonpath(folders))}
    if len(found) != 1:
        raise ValueError("folders in more than one repository")
    return found.pop()


def _above(folder: str) -> str | None:
    device = os.stat(folder).st_dev
    while True:
        git = os.path.join(folder, ".git")
        try:
            st = os.lstat(git)
        except FileNotFoundError:
            st = None
        if st is not None:
            if not stat.S_ISDIR(st.st_mode) or {st.st_uid, os.stat(folder).st_uid} != {os.geteuid()}:
                raise ValueError("a .git file, or another user's repository")
            return git
        up = os.path.dirname(folder)
        if up == folder:
            return None
        if os.stat(up).st_dev != device:
            raise ValueError("another file system above")
        folder = up


def unchanged(kept: dict[str, Any], paths: Sequence[str]) -> bool:
    """Whether every file ``kept`` watched, and every entry under ``paths``, is as it was (then so
    are the spec files among them, found as they were: ``recorded`` saw each at its hash's stat,
    so none through a symbolic link)."""
    for name, key in kept["watched"]:
        if _key(name) != key:
            return False
    tree = _tree(paths)
    return tree is not None and _digest(tree) == kept["tree"]


def recorded(
    paths: Sequence[str], revision: dict[str, Any], since_ns: int, files: dict[str, str]
) -> dict[str, Any] | None:
    """What the plan's ``revision`` was decided by, to be checked by ``unchanged``; ``None``:
    refused, anything watched changed within ``RACY_NS`` before ``since_ns``, or a spec file
    not with the stat its hash was taken at (``files``)."""
    try:
        git = repository(paths)
        if git is None:
            return None
        top = os.path.dirname(git)
        if os.path.realpath(top) != os.path.realpath(str(revision.get("top"))):
            return None  # core.worktree elsewhere
        branch, commit = _head(git)
        if not commit or commit != revision.get("commit") or (branch and branch != revision.get("ref")):
            return None  # moved while the plan ran, or a branch's name shortened otherwise
        watched = [os.path.join(git, f) for f in _GIT_FILES]
        if branch:
            watched += [os.path.join(git, rule % branch) for rule in _SHORT_RULES]
        home = os.environ.get("HOME", "")
        xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        configs = [os.path.join(home, ".gitconfig"), os.path.join(xdg, "git", "config"), "/etc/gitconfig"]
        watched += [*configs, os.path.join(xdg, "git", "ignore"), os.path.join(xdg, "git", "attributes")]
        watched.append("/etc/gitattributes")
        configs += [os.path.join(git, "config"), os.path.join(git, "config.worktree")]
        for p in paths:
            real = os.path.realpath(p)
            folder = real if os.path.isdir(real) else os.path.dirname(real)
            while folder == top or folder.startswith(top + os.sep):
                watched += [os.path.join(folder, ".gitignore"), os.path.join(folder, ".gitattributes")]
                if folder == top:
                    break
                folder = os.path.dirname(folder)
        extra = _asked_of_git(top, configs)
        if extra is None:
            return None
        watched = list(dict.fromkeys([*watched, *extra]))
        for name in configs:
            if os.path.exists(name):
                with open(name, "rb") as f:
                    if b"include" in f.read().lower():
                        return None
        if os.path.exists(os.path.join(git, "commondir")) or os.path.exists(os.path.join(git, "reftable")):
            return None
        stats = [(name, _lstat(name)) for name in watched]
        tree = _tree(paths)
    except (OSError, ValueError, UnicodeError):
        return None
    if tree is None:
        return None
    seen = {n: stat_key(st) for n, st in tree}
    if any(seen.get(n) != held for n, held in files.items()):  # one changed, or read through a link
        return None
    latest = since_ns - hashes.RACY_NS
    if any(st is not None and max(st.st_mtime_ns, st.st_ctime_ns) >= latest for _, st in (*stats, *tree)):
        return None
    return {
        "dir": git,
        "watched": [(n, None if st is None else _stat_key(st)) for n, st in stats],
        "tree": _digest(tree),
    }


def _head(git: str) -> tuple[str | None, str | None]:
    """The branch ``HEAD`` is on (``None``: detached) and the commit it is at (``None``: none)."""
    with open(os.path.join(git, "HEAD"), encoding="utf-8") as f:
        head = f.read().strip()
    if head.startswith("ref: refs/heads/"):
        branch = head.removeprefix("ref: refs/heads/")
        return branch, _ref(git, f"refs/heads/{branch}")
    return None, (None if head.startswith("ref:") else head)  # detached (or on no branch: refused)


def _ref(git: str, ref: str) -> str | None:
    """The commit ``ref`` names: its loose file's, else its line of ``packed-refs``; ``None`` when
    neither holds it (a branch with no commit yet)."""
    with contextlib.suppress(FileNotFoundError), open(os.path.join(git, ref), encoding="utf-8") as f:
        return f.read().strip()
    with (
        contextlib.suppress(FileNotFoundError),
        open(os.path.join(git, "packed-refs"), encoding="utf-8") as f,
    ):
        for line in f:
            sha, _, name = line.rstrip("\n").partition(" ")
            if name == ref:
                return sha
    return None


def _asked_of_git(top: str, configs: list[str]) -> list[str] | None:
    """The files ``core.excludesFile`` and ``core.attributesFile`` name; ``None`` when git reads a
    configuration file that is not among ``configs`` (then it is not watched: refused)."""
    import subprocess

    from ..sources.gitcli import _environment

    env = _environment(None, None)

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=top, env=env, capture_output=True, check=False)
        return done.stdout.decode("utf-8", "surrogateescape")

    for origin in git("config", "--list", "--show-origin", "-z").split("\0")[::2]:
        if origin.startswith("file:") and os.path.normpath(os.path.join(top, origin[5:])) not in configs:
            return None
    named = git("config", "--type=path", "--get-regexp", r"^core\.(excludesfile|attributesfile)$")
    return [line.partition(" ")[2] for line in named.splitlines() if line.partition(" ")[2]]


def _tree(paths: Sequence[str]) -> list[tuple[str, os.stat_result]] | None:
    """Each path and every entry under it, hidden ones too, by ``lstat`` (a symbolic link as git
    sees it, not followed), in a stable order (``None``: a nested repository, a path that is or
    goes through a symbolic link, or a path gone: refused)."""
    out: list[tuple[str, os.stat_result]] = []
    try:
        for p in paths:
            st = os.lstat(p)
            out.append((p, st))
            if os.path.realpath(p) != os.path.abspath(p) or stat.S_ISLNK(st.st_mode):
                return None
            if stat.S_ISDIR(st.st_mode) and not _walk(p, out):
                return None
    except OSError:
        return None
    return out


def _walk(folder: str, out: list[tuple[str, os.stat_result]]) -> bool:
    """Every entry under ``folder`` and its ``lstat``, depth-first in name order, without
    recursion (a stack of each open folder's entries: any depth a path allows); ``False`` at a
    nested repository."""
    pending = [iter(sorted(os.scandir(folder), key=lambda e: e.name))]
    while pending:
        for entry in pending[-1]:
            if entry.name == ".git":
                return False
            st = entry.stat(follow_symlinks=False)
            out.append((entry.path, st))
            if stat.S_ISDIR(st.st_mode):
                pending.append(iter(sorted(os.scandir(entry.path), key=lambda e: e.name)))
                break
        else:
            pending.pop()
    return True


def _digest(tree: list[tuple[str, os.stat_result]]) -> str:
    """One hash of the names and stats of ``tree``: the entry kept is small, read quickly."""
    text = "\0".join(f"{n}\0{_stat_key(st)}" for n, st in tree)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _lstat(name: str) -> os.stat_result | None:
    try:
        return os.lstat(name)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _key(name: str) -> str | None:
    st = _lstat(name)
    return None if st is None else _stat_key(st)


def _stat_key(st: os.stat_result) -> str:
    return f"{stat_key(st)}:{st.st_mode:o}"
