"""A remote repository as a source: fetched into a cache under astra's home, read as commits.

``Remote(url, ref, home=…)``: the cache is ``HOME/sources/<slug>-<hash of url and ref>/``
holding ``repo.git`` (a bare repository: objects and refs only) and the snapshot of the commit
last checked out (``snapshot``). ``fetch()`` fetches ``ref`` (a branch or a tag; the remote's
``HEAD`` when none) and answers a ``Fetched``: the tip's ``Revision`` and whether the tip descends
from the one fetched before (``forced``: it does not, history was rewritten, a force-push).
``checkout(commit, folder)`` writes that commit's tree out (``Snapshot``) and answers the
``Checkout`` to load. ``commit(rev)`` resolves a sha (or any revision git reads) the cache holds.

The URL is never written into the cache's configuration (it may hold a token); a token file's
token goes to git as a header (``gitcli``); messages show URLs without credentials.

Must not touch: the load, the state.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .checkout import Checkout
from .gitcli import Git, GitError, SourceError, redact
from .revision import COMMIT_FORMAT, Revision, parse_commit
from .snapshot import Snapshot

__all__ = ["Fetched", "Remote", "SourceFetchFailed", "clean_folder"]

_TIP = "refs/astra/tip"


class SourceFetchFailed(SourceError):
    """The remote could not be fetched (unreachable, refused, no such ref)."""


@dataclass(frozen=True)
class Fetched:
    revision: Revision
    previous: str | None = None  # the tip fetched before, if any
    forced: bool = False  # the new tip does not descend from the previous one


def clean_folder(folder: str | None) -> str:
    """A folder inside the repository, as a relative POSIX path ('' for the root); ``SourceError``
    for one that climbs out."""
    if not folder:
        return ""
    parts = [p for p in PurePosixPath(folder.replace("\\", "/")).parts if p not in ("", ".", "/")]
    if any(p == ".." for p in parts):
        raise SourceError(f"the folder '{folder}' climbs out of the repository")
    return "/".join(parts)


class Remote:
    """One remote repository and ref, cached under ``home/sources`` (see the module docstring)."""

    def __init__(self, url: str, ref: str | None = None, *, home: Path, token: str | None = None):
        self.url = url
        self.ref = ref or None
        shown = redact(url)
        slug = re.sub(r"[^A-Za-z0-9]+", "-", shown.rsplit("/", 1)[-1].removesuffix(".git")).strip("-")[:40]
        key = hashlib.sha256(f"{shown}\0{self.ref or ''}".encode()).hexdigest()[:16]
        self.folder = home / "sources" / f"{slug or 'repo'}-{key}"
        self.git = Git(self.folder / "repo.git", token=token)
        self.snapshot = Snapshot(self.folder, self.git)

    @property
    def shown(self) -> str:
        return redact(self.url)

    def _ensure(self) -> None:
        if not (self.folder / "repo.git" / "HEAD").is_file():
            self.folder.mkdir(parents=True, exist_ok=True)
            Git(None).run("init", "-q", "--bare", str(self.folder / "repo.git"))

    def fetch(self) -> Fetched:
        """Fetch the ref; ``SourceFetchFailed`` when the remote cannot be read."""
        try:
            self._ensure()
            previous = self._tip()
            self.git.run("fetch", "-q", "--no-tags", "--no-write-fetch-head", self.url, f"+{self._refspec()}")
            commit = self.git.text("rev-parse", "--verify", "-q", f"{_fetched(self.ref)}^{{commit}}")
        except GitError as exc:
            raise SourceFetchFailed(f"cannot fetch {self.shown} ({self.ref or 'HEAD'}): {exc}") from exc
        forced = (
            previous is not None
            and previous != commit
            and not self.git.ok("merge-base", "--is-ancestor", previous, commit)
        )
        self.git.run("update-ref", _TIP, commit)
        if previous is not None and previous != commit:  # kept, so that a rollback can find it
            self.git.run("update-ref", f"refs/astra/seen/{previous}", previous)
        return Fetched(self.describe(commit), previous, forced)

    def _refspec(self) -> str:
        """The ref as given (a branch, a tag, ``refs/…``; git looks it up as for any fetch), kept
        under ``refs/astra/fetched/``."""
        return f"{self.ref or 'HEAD'}:{_fetched(self.ref)}"

    def _tip(self) -> str | None:
        try:
            return self.git.text("rev-parse", "--verify", "-q", _TIP) or None
        except GitError:
            return None

    def describe(self, commit: str, *, rollback: bool = False) -> Revision:
        text = self.git.text("log", "-1", f"--format={COMMIT_FORMAT}", commit)
        revision = parse_commit(text, self.ref or "HEAD")
        return revision.as_rollback() if rollback else revision

    def commit(self, rev: str) -> str:
        """The full sha of ``rev`` in the cache (``SourceError`` when it holds no such commit)."""
        try:
            return self.git.text("rev-parse", "--verify", "-q", f"{rev}^{{commit}}")
        except GitError as exc:
            raise SourceError(
                f"no commit {rev} in {self.shown} ({self.ref or 'HEAD'}): fetch it first"
            ) from exc

    def checkout(self, revision: Revision, folder: str | None = None) -> Checkout:
        """The tree of ``revision`` written out, as a ``Checkout`` of ``folder`` in it."""
        inside = clean_folder(folder)
        self.snapshot.update(revision.commit)
        real = os.path.join(self.snapshot.tree, inside) if inside else str(self.snapshot.tree)
        if not os.path.isdir(real):
            raise SourceError(f"commit {revision.commit[:12]} of {self.shown} has no folder '{inside}'")
        return Checkout((real,), (inside or ".",), revision, None, self.shown)


def _fetched(ref: str | None) -> str:
    """Where a fetched ref is kept in the cache."""
    name = re.sub(r"[^A-Za-z0-9._/-]+", "-", ref or "HEAD").strip("/").replace("..", "-")
    return f"refs/astra/fetched/{name or 'HEAD'}"
