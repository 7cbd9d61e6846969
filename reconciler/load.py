"""The load step of plan, apply and watch: files → the desired runs of a source, or every problem.

``load_source(paths, template=, sets=, cache=)`` finds the files (as ``astra validate`` does),
reads and hashes each (sha256 of its bytes), and loads, renders and validates the ones the
cache does not know (``reconciler.desired.load_desired``). Then it checks that run names are
unique across the source; a clash names both files.

``Loaded.ok`` is false when anything failed: callers must then stop. A failed load is never an
empty (or partial) desired set, so nothing is ever pruned because a file did not load.

``refresh(loaded, changed)`` reloads only the changed files (the watch loop's fast path).

The cache (``FileCache``, under ``.astra/cache`` or ``$ASTRA_HOME/cache``): one JSON file per
content hash, holding that file's final run documents, each with its normalised form and that
form's digest (``reconciler.spec.normalize``), so that a warm plan neither parses nor
normalises a file that did not change. An entry of a file that uses templates
also holds a fingerprint of every template on the search path and is used only while that
fingerprint holds. Only files without problems are cached; ``--set`` bypasses the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .desired import load_desired
from .plan.build import DesiredItem
from .spec.errors import ErrorType, FieldError
from .spec.loading import Document, Source
from .spec.normalize import digest as doc_digest
from .spec.normalize import normalize
from .spec.paths import FieldPath
from .spec.validate import SPEC_SUFFIXES, find_files, published_schema

__all__ = ["CACHE_VERSION", "FileCache", "Loaded", "LoadedFile", "default_cache", "load_source", "refresh"]

#: Bump when what a cache entry holds changes.
CACHE_VERSION = "2"
_NAME = FieldPath.root().child("metadata", "name")


#: From this many entries written at once (a cold load), they go into one pack file.
PACK_FROM = 200
#: Packs kept (the newest): older ones are deleted when a new one is written.
PACKS_KEPT = 2


class FileCache:
    """Final run documents by content hash, one JSON file each, or many in one pack (``packs/``,
    written by a load that missed ``PACK_FROM`` or more: one write instead of thousands, and one
    read); ``folder=None`` caches nothing."""

    def __init__(self, folder: str | os.PathLike[str] | None):
        self.folder = Path(folder) if folder is not None else None
        self._salt = _salt()
        self._packs: dict[str, Any] | None = None

    def _pack_index(self) -> dict[str, Any]:
        """Every pack's entries by key, read once (the newest pack last)."""
        if self._packs is None:
            self._packs = {}
            assert self.folder is not None
            for path in self._pack_files():
                try:
                    data = json.loads(path.read_bytes())
                except (OSError, ValueError):
                    continue
                if isinstance(data, dict) and data.get("salt") == self._salt:
                    self._packs.update(data.get("entries") or {})
        return self._packs

    def _pack_files(self) -> list[Path]:
        assert self.folder is not None
        try:
            found = [(p.stat().st_mtime_ns, p) for p in (self.folder / "packs").glob("*.json")]
        except OSError:
            return []
        return [p for _, p in sorted(found)]

    def _path(self, digest: str) -> Path:
        assert self.folder is not None
        return self.folder / digest[:2] / f"{digest}.json"

    def key(self, digest: str) -> str:
        return hashlib.sha256(f"{self._salt}:{digest}".encode()).hexdigest()

    def get(self, digest: str) -> dict[str, Any] | None:
        if self.folder is None:
            return None
        key = self.key(digest)
        packed = self._pack_index().get(key)
        if packed is not None:
            return packed
        try:
            with open(self._path(key), encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def put(self, digest: str, entry: dict[str, Any]) -> None:
        if self.folder is None:
            return
        path = self._path(self.key(digest))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(entry, separators=(",", ":")), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass  # a cache that cannot be written is only slower

    def put_many(self, entries: dict[str, dict[str, Any]]) -> None:
        """``put`` each; from ``PACK_FROM`` entries, one pack file holding them all."""
        if self.folder is None or not entries:
            return
        if len(entries) < PACK_FROM:
            for digest, entry in entries.items():
                self.put(digest, entry)
            return
        keyed = {self.key(d): e for d, e in entries.items()}
        name = hashlib.sha256("\n".join(sorted(keyed)).encode()).hexdigest()
        path = self.folder / "packs" / f"{name}.json"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"salt": self._salt, "entries": keyed}, separators=(",", ":")), "utf-8")
            os.replace(tmp, path)
            for old in self._pack_files()[:-PACKS_KEPT]:
                old.unlink(missing_ok=True)
        except OSError:
            return
        if self._packs is not None:
            self._packs.update(keyed)


def _salt() -> str:
    """What makes an old entry wrong: the cache's version and the published schema."""
    schema = json.dumps(published_schema("run"), sort_keys=True)
    return f"{CACHE_VERSION}:{hashlib.sha256(schema.encode()).hexdigest()[:16]}"


@dataclass
class LoadedFile:
    """One file: its hash, its valid runs (each with the document it came from), its problems."""

    path: str
    sha256: str
    entries: list[tuple[Document, DesiredItem]] = field(default_factory=list)
    errors: list[FieldError] = field(default_factory=list)
    templated: bool = False

    @property
    def runs(self) -> list[DesiredItem]:
        return [r for _, r in self.entries]


@dataclass
class Loaded:
    """A source's files as loaded: every file, the runs by name, every problem."""

    paths: list[str]
    template: str | None
    sets: tuple[str, ...]
    files: dict[str, LoadedFile] = field(default_factory=dict)
    templates: dict[str, str] = field(default_factory=dict)  # template file → sha256
    base_errors: list[FieldError] = field(default_factory=list)  # not of one file: paths, flags
    runs: dict[str, DesiredItem] = field(default_factory=dict)
    errors: list[FieldError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def hashes(self) -> dict[str, str]:
        """Every file the runs came from (and the templates, when one is used) → its sha256."""
        out = {p: f.sha256 for p, f in self.files.items()}
        if any(f.templated for f in self.files.values()):
            out.update(self.templates)
        return dict(sorted(out.items()))

    @property
    def revision(self) -> str:
        """One hash of everything loaded: the files, the templates, ``--template`` and ``--set``."""
        text = json.dumps([self.hashes(), self.templates, self.template, list(self.sets)], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def names_in(self, files: Iterable[str]) -> set[str]:
        """The runs the given files hold."""
        return {r.name for f in files if f in self.files for r in self.files[f].runs}


def _template_fingerprint() -> dict[str, str]:
    from .templates import TemplateLibrary

    out = {}
    for path in TemplateLibrary().names().values():
        try:
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            continue
    return dict(sorted(out.items()))


def load_source(
    paths: Sequence[str | os.PathLike[str]],
    *,
    template: str | None = None,
    sets: Sequence[str] = (),
    cache: FileCache | None = None,
) -> Loaded:
    """Load a source's files (see the module docstring)."""
    loaded = Loaded([os.fspath(p) for p in paths], template, tuple(sets))
    loaded.templates = _template_fingerprint()
    files, loaded.base_errors = find_files(paths)
    _load_files(loaded, [os.fspath(f) for f in files], cache)
    _finish(loaded)
    return loaded


def refresh(
    loaded: Loaded, changed: Iterable[str | os.PathLike[str]], cache: FileCache | None = None
) -> Loaded:
    """``loaded`` with the changed files read again (new files added, deleted ones dropped).

    A change to a template reloads everything.
    """
    fingerprint = _template_fingerprint()
    if fingerprint != loaded.templates:
        return load_source(loaded.paths, template=loaded.template, sets=loaded.sets, cache=cache)
    again = Loaded(loaded.paths, loaded.template, loaded.sets, dict(loaded.files), fingerprint)
    again.base_errors = list(loaded.base_errors)
    wanted = []
    for c in changed:
        name = _display(c, loaded)
        if name is None:
            continue
        if os.path.isfile(name) and os.path.splitext(name)[1] in SPEC_SUFFIXES:
            wanted.append(name)
        else:
            again.files.pop(name, None)
    _load_files(again, sorted(set(wanted)), cache)
    again.files = dict(sorted(again.files.items(), key=lambda kv: kv[0].split(os.sep)))
    _finish(again)
    return again


def _display(changed: str | os.PathLike[str], loaded: Loaded) -> str | None:
    """The name ``find_files`` gives ``changed`` under the watched paths, or ``None``."""
    target = Path(changed).resolve()
    for given in loaded.paths:
        root = Path(given).resolve()
        if target == root:
            return given
        try:
            rel = target.relative_to(root)
        except ValueError:
            continue
        if any(part.startswith(".") for part in rel.parts):
            return None
        return os.path.join(given, *rel.parts)
    return None


#: From this many files missing from the cache, they are loaded on every core (as validate does).
PARALLEL_FROM = 500


def _from_cache(loaded: Loaded, name: str, data: bytes, sha: str, entry: dict[str, Any] | None) -> bool:
    """Take ``name``'s runs from its cache entry, when it has one that holds here."""
    if (
        entry is None
        or entry.get("template") != loaded.template
        or (entry.get("templated") and entry.get("templates") != loaded.templates)
    ):
        return False
    source = Source(name, data.decode("utf-8-sig"), json=name.endswith(".json"))
    entries = [
        (Document(source, i, d), DesiredItem(d["metadata"]["name"], d, name, n, h))
        for i, d, n, h in entry["documents"]
    ]
    loaded.files[name] = LoadedFile(name, sha, entries, [], bool(entry.get("templated")))
    return True


def _forkable(missing: int) -> bool:
    import threading

    jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    # fork only a process without other threads (a fork copies none of them, nor their locks)
    return missing >= PARALLEL_FROM and jobs > 1 and hasattr(os, "fork") and threading.active_count() == 1


def _fill_cache(loaded: Loaded, names: list[str], cache: FileCache) -> None:
    """Load ``names`` on every core, each process writing its files' cache entries."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    chunks = [names[i::jobs] for i in range(jobs)]
    entries: dict[str, dict[str, Any]] = {}
    try:
        with ProcessPoolExecutor(jobs, mp_context=get_context("fork")) as pool:
            args = [loaded.template] * jobs, [loaded.templates] * jobs, chunks, [cache] * jobs
            for part in pool.map(_cache_chunk, *args):
                entries.update(part)
    except Exception:
        pass  # whatever is not in the cache now is loaded in this process
    cache.put_many(entries)


def _cache_chunk(
    template: str | None, templates: dict[str, str], names: list[str], cache: FileCache
) -> dict[str, dict[str, Any]]:
    """One process's share: its files' cache entries (by content hash), written by the parent."""
    part = Loaded([], template, (), templates=templates)
    return _load_files(part, names, cache, parallel=False, write=False)


def _load_files(
    loaded: Loaded, names: list[str], cache: FileCache | None, *, parallel: bool = True, write: bool = True
) -> dict[str, dict[str, Any]]:
    """Load ``names`` into ``loaded``, from the cache where it holds them; the new cache entries
    (by content hash), written to the cache unless ``write`` is false."""
    use_cache = cache is not None and not loaded.sets
    fresh: dict[str, dict[str, Any]] = {}
    missed: list[str] = []
    for name in names:
        try:
            with open(name, "rb") as f:
                data = f.read()
        except OSError:
            loaded.files[name] = LoadedFile(name, "")
            missed.append(name)  # load_desired says what is wrong with it
            continue
        digest = hashlib.sha256(data).hexdigest()
        entry = cache.get(digest) if use_cache and cache is not None else None
        if not _from_cache(loaded, name, data, digest, entry):
            loaded.files[name] = LoadedFile(name, digest)
            missed.append(name)
    if not missed:
        return fresh
    if parallel and use_cache and cache is not None and cache.folder is not None and _forkable(len(missed)):
        # many files not in the cache (a cold plan): loaded into the cache on every core, then
        # read from it here as a warm load would; what is still missing is loaded below
        _fill_cache(loaded, missed, cache)
        still = []
        for name in missed:
            f = loaded.files[name]
            try:
                with open(name, "rb") as fh:
                    data = fh.read()
            except OSError:
                still.append(name)
                continue
            if hashlib.sha256(data).hexdigest() != f.sha256 or not _from_cache(
                loaded, name, data, f.sha256, cache.get(f.sha256)
            ):
                still.append(name)
        missed = still
        if not missed:
            return fresh
    desired = load_desired(missed, template=loaded.template, sets=loaded.sets)
    by_file = {n: loaded.files[n] for n in missed}
    for run in desired.runs:
        f = by_file.get(run.document.source.name)
        if f is not None:
            normalized = normalize(run.data)
            h = doc_digest(normalized)
            # kept only when it reads back from JSON as it is (``h`` is None otherwise)
            item = DesiredItem(run.name or "", run.data, f.path, normalized if h else None, h)
            f.entries.append((run.document, item))
            f.templated = f.templated or run.template is not None
    leftover = []
    for e in desired.errors:
        if e.file in by_file:
            by_file[e.file].errors.append(e)
        else:
            leftover.append(e)  # the command line's, or a template file's
    for f in by_file.values():
        f.errors += leftover  # each file of the batch keeps them, so a refresh cannot lose them
        if use_cache and cache is not None and not f.errors and f.sha256:
            fresh[f.sha256] = {
                "template": loaded.template,
                "templated": f.templated,
                "templates": loaded.templates if f.templated else None,
                "documents": [[d.index, r.document, r.normalized, r.digest] for d, r in f.entries],
            }
    if write and cache is not None:
        cache.put_many(fresh)
    return fresh


def _finish(loaded: Loaded) -> None:
    """Gather every problem and check that run names are unique across the source."""
    errors = list(loaded.base_errors)
    runs: dict[str, tuple[DesiredItem, Document]] = {}
    for f in loaded.files.values():
        errors += f.errors
        for doc, run in f.entries:
            first = runs.get(run.name)
            if first is None:
                runs[run.name] = (run, doc)
                continue
            text = (
                f"run name '{run.name}' is also used in {_where(first[1])}: "
                "run names must be unique in a source"
            )
            line, column = doc.source.locate(doc.index, _NAME)
            errors.append(FieldError(ErrorType.duplicate, _NAME, text, doc.source.name, line, column))
    unique = {(e.file, e.line, e.column, str(e.path), e.message): e for e in errors}
    loaded.errors = sorted(unique.values(), key=lambda e: e.sort_key())
    loaded.runs = {} if loaded.errors else {n: r for n, (r, _) in sorted(runs.items())}


def _where(doc: Document) -> str:
    line, column = doc.source.locate(doc.index, _NAME)
    return f"{doc.source.name}:{line}:{column}"


def default_cache() -> FileCache:
    """The cache under ``$ASTRA_HOME/cache``, else ``.astra/cache``."""
    from .state import astra_home

    return FileCache(astra_home() / "cache")
