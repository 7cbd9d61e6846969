"""The load cache: what loading each file content found, by its sha256, on disk.

``FileCache(folder)`` (under ``cache/`` in astra's home, ``reconciler.home``; ``folder=None`` caches
nothing) keeps, by a file's content hash, each run's document index, name and the digest of
its normalised document (``reconciler.runspec.normalize``), and the template used. A warm load
reads no file: each run comes with its digest only (``from_cache``), and the runs a plan needs
in full get their documents from their files again (``reconciler.load.documents``). An entry of
a file that uses templates also holds a fingerprint of every template on the search path and
is used only while that fingerprint holds. Only files without problems are cached.

On disk: a load that misses fewer than ``PACK_FROM`` files writes one JSON file per file
content (``ab/<key>.json``); a larger one writes all of them in one *pack*,
``packs/<generation>-<part>.json`` (a cold load on every core: each forked share writes its
part). Only the newest ``PACKS_KEPT`` packs are kept. Beside them, ``stat.json`` remembers each
file's content hash by its stat (``reconciler.hashes``): a warm load does not even read a file
that did not change. A cache file that cannot be read is a miss (said at debug level): the file
is loaded again, as without a cache.

Must not touch: clusters, the plan, the source's state.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from functools import cached_property
from pathlib import Path
from typing import Any

from ..atomic import compact_json, write_atomically
from ..hashes import StatHashes
from ..runs import DesiredItem
from ..runspec.files import published_text
from .loaded import Loaded, LoadedFile

__all__ = [
    "CACHE_VERSION",
    "PACKS_KEPT",
    "PACK_FROM",
    "FileCache",
    "cached_file",
    "from_cache",
    "new_generation",
    "usable",
]

log = logging.getLogger(__name__)

#: Bump when what a cache entry holds changes.
CACHE_VERSION = "4"
#: From this many entries written at once (a cold load), they go into one pack.
PACK_FROM = 200
#: Packs kept (the newest): older ones are deleted when a new one is written.
PACKS_KEPT = 2


class FileCache:
    """What loading each file content found (see the module docstring); ``folder=None`` caches
    nothing."""

    def __init__(self, folder: str | os.PathLike[str] | None):
        self.folder = Path(folder) if folder is not None else None
        self._salt = _salt() if folder is not None else ""
        self._index: dict[str, Any] | None = None
        self._singles: set[str] | None = None

    @cached_property
    def hashes(self) -> StatHashes:
        """The files' content hashes, remembered by their stat (read when first wanted: a forked
        share that only asks the cache does not read them)."""
        return StatHashes(self.folder / "stat.json" if self.folder is not None else None)

    @property
    def _packs(self) -> Path:
        assert self.folder is not None
        return self.folder / "packs"

    def _pack_index(self) -> dict[str, Any]:
        """Every pack's entries by content hash, read once (the newest pack last)."""
        if self._index is None:
            self._index = {}
            for path in self._pack_files():
                try:
                    data = json.loads(path.read_bytes())
                except (OSError, ValueError) as exc:
                    log.debug("load cache: pack %s unreadable (%s): its files are loaded again", path, exc)
                    continue
                if isinstance(data, dict) and data.get("salt") == self._salt:
                    self._index.update(data.get("entries") or {})
        return self._index

    def _pack_files(self) -> list[Path]:
        try:
            found = [(p.stat().st_mtime_ns, p) for p in self._packs.glob("*.json")]
        except OSError:
            return []
        return [p for _, p in sorted(found)]

    def _folders(self) -> set[str]:
        """The folders of single entries there are (read once: a load adds its own only after)."""
        if self._singles is None:
            assert self.folder is not None
            try:
                self._singles = {n for n in os.listdir(self.folder) if len(n) == 2}
            except OSError:
                self._singles = set()
        return self._singles

    def _path(self, digest: str) -> Path:
        assert self.folder is not None
        key = hashlib.sha256(f"{self._salt}:{digest}".encode()).hexdigest()
        return self.folder / key[:2] / f"{key}.json"

    def get(self, digest: str) -> dict[str, Any] | None:
        if self.folder is None:
            return None
        found = self._pack_index().get(digest)
        if found is not None or not self._folders():
            return found  # no single entries at all (a cold load): nothing more to try
        path = self._path(digest)
        if path.parent.name not in self._folders():
            return None
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as exc:
            log.debug("load cache: entry %s unreadable (%s): the file is loaded again", path, exc)
            return None
        return data if isinstance(data, dict) and "runs" in data else None

    def put_many(self, entries: dict[str, dict[str, Any]]) -> None:
        """Each entry in a file of its own; from ``PACK_FROM`` entries, one pack holding them all
        (then only the newest ``PACKS_KEPT`` packs are kept)."""
        if self.folder is None or not entries:
            return
        if len(entries) < PACK_FROM:
            for digest, entry in entries.items():
                path = self._path(digest)
                if write_atomically(path, compact_json(entry)):
                    self._folders().add(path.parent.name)
            return
        if self.put_part(entries, new_generation(), 0):
            self.prune_packs()

    def put_part(self, entries: dict[str, dict[str, Any]], generation: str, part: int) -> bool:
        """One part of the pack ``generation`` (the forked shares of a cold load write one each;
        ``prune_packs`` after): whether it was written."""
        if self.folder is None or not entries:
            return False
        text = compact_json({"salt": self._salt, "entries": entries})
        if not write_atomically(self._packs / f"{generation}-{part}.json", text):
            return False
        if self._index is not None:
            self._index.update(entries)
        return True

    def prune_packs(self) -> None:
        """Delete every pack but the newest ``PACKS_KEPT`` (a pack: the parts of one generation)."""
        parts = self._pack_files()
        newest = sorted({p.name.split("-")[0] for p in parts})[-PACKS_KEPT:]
        for old in parts:
            if old.name.split("-")[0] not in newest:
                old.unlink(missing_ok=True)


def new_generation() -> str:
    """A pack's name: the time, in hexadecimal nanoseconds (so names sort as times do)."""
    return f"{time.time_ns():016x}"


def _salt() -> str:
    """What makes an old entry wrong: the cache's version and the published schema."""
    from ..runspec.normalize import DIGEST_VERSION  # its digests are of that normalisation

    return (
        f"{CACHE_VERSION}:{DIGEST_VERSION}:{hashlib.sha256(published_text('run').encode()).hexdigest()[:16]}"
    )


def usable(loaded: Loaded, entry: dict[str, Any] | None) -> bool:
    """Whether a cache entry holds here: there is one, made with the same ``--template`` (for a
    templated file, with the same templates), and each of its runs has a digest (a run without
    one is planned from its document: its file is loaded)."""
    return not (
        entry is None
        or entry.get("template") != loaded.template
        or (entry.get("templated") and entry.get("templates") != loaded.templates)
        or any(digest is None for _, _, digest in entry["runs"])
    )


def cached_file(name: str, sha: str, runs: list[list[Any]], templated: bool) -> LoadedFile:
    """A file as a usable cache entry gives it (``runs``: its ``[index, name, digest]``s): each run
    with its digest, without its document."""
    items = [(index, DesiredItem(run, None, name, None, digest)) for index, run, digest in runs]
    return LoadedFile(name, sha, items, [], templated)


def from_cache(loaded: Loaded, name: str, sha: str, entry: dict[str, Any] | None) -> bool:
    """Take ``name``'s runs from the cache entry, when there is one that holds here (``usable``):
    each run with its digest, without its document."""
    if entry is None or not usable(loaded, entry):
        return False
    loaded.files[name] = cached_file(name, sha, entry["runs"], bool(entry.get("templated")))
    return True
