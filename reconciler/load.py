"""The load step of plan, apply and watch: files → the desired runs of a source, or every problem.

``load_source(paths, template=, sets=, cache=)`` finds the files (as ``astra validate`` does),
reads and hashes each (sha256 of its bytes), and loads, renders and validates the ones the
cache does not know (``reconciler.desired.load_desired``). Then it checks that run names are
unique across the source; a clash names both files.

``Loaded.ok`` is false when anything failed: callers must then stop. A failed load is never an
empty (or partial) desired set, so nothing is ever pruned because a file did not load.

``refresh(loaded, changed)`` reloads only the changed files (the watch loop's fast path).

The cache (``FileCache``, under ``.astra/cache`` or ``$ASTRA_HOME/cache``) keeps, by a file's
content hash, its *meta* (the template used, and each run's document index, name and the
digest of its normalised document, ``reconciler.spec.normalize``) apart from its *documents*
(each run's final document and normalised form). A warm load reads only metas: each run comes
with its digest, and its documents are read the first time the plan needs them (a run whose
digests all agree never needs them). An entry of a file that uses templates also holds a
fingerprint of every template on the search path and is used only while that fingerprint
holds. Only files without problems are cached; ``--set`` bypasses the cache.

On disk: a load that misses fewer than ``PACK_FROM`` files writes one JSON file per file
content (``ab/<key>.json``: meta and documents); a larger one (a cold plan) writes a *pack*:
``packs/<gen>.json``, the index (each content hash → its meta and where its documents are), and
``packs/<gen>-<part>.docs``, the documents of each one after the other (each JSON text at an
offset, so one run's documents are read without the rest). On every core, each process writes
the documents of its share and the parent writes the one index. Only the newest
``PACKS_KEPT`` packs are kept. Beside them, ``stat.json`` remembers each file's content hash by
its stat (``reconciler.hashes``): a warm load reads no file that did not change.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from .atomic import write_atomically
from .cores import forkable, on_every_core, split
from .desired import load_desired
from .hashes import StatHashes
from .plan.build import DesiredItem
from .plan.model import PlanError
from .spec.errors import ErrorType, FieldError
from .spec.loading import Source
from .spec.normalize import digest as doc_digest
from .spec.normalize import normalize
from .spec.paths import FieldPath
from .spec.validate import SPEC_SUFFIXES, find_files, published_schema

__all__ = ["CACHE_VERSION", "FileCache", "Loaded", "LoadedFile", "default_cache", "load_source", "refresh"]

#: Bump when what a cache entry holds changes.
CACHE_VERSION = "3"
_NAME = FieldPath.root().child("metadata", "name")


#: From this many entries written at once (a cold load), they go into one pack.
PACK_FROM = 200
#: Packs kept (the newest): older ones are deleted when a new one is written.
PACKS_KEPT = 2

#: A file's cached runs: their meta, and their documents ([[document, normalised], …]) in order.
Fresh = dict[str, tuple[dict[str, Any], list[list[Any]]]]


@dataclass
class Hit:
    """What the cache holds for one file's content: its meta, and how to read its documents."""

    meta: dict[str, Any]
    documents: Callable[[], Any]


class FileCache:
    """Metas and documents by content hash (see the module docstring); ``folder=None`` caches
    nothing."""

    def __init__(self, folder: str | os.PathLike[str] | None):
        self.folder = Path(folder) if folder is not None else None
        self._salt = _salt() if folder is not None else ""
        self._index: dict[str, Any] | None = None
        #: the files' content hashes, remembered by their stat
        self.hashes = StatHashes(self.folder / "stat.json" if self.folder is not None else None)

    @property
    def _packs(self) -> Path:
        assert self.folder is not None
        return self.folder / "packs"

    def _pack_index(self) -> dict[str, Any]:
        """Every pack's index rows by content hash, read once (the newest pack last)."""
        if self._index is None:
            self._index = {}
            for path in self._pack_files():
                try:
                    data = json.loads(path.read_bytes())
                except (OSError, ValueError):
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

    def _path(self, digest: str) -> Path:
        assert self.folder is not None
        key = hashlib.sha256(f"{self._salt}:{digest}".encode()).hexdigest()
        return self.folder / key[:2] / f"{key}.json"

    def get(self, digest: str) -> Hit | None:
        if self.folder is None:
            return None
        row = self._pack_index().get(digest)
        if row is not None:
            meta, docs, offset, length = row
            return Hit(meta, partial(self._read_docs, docs, offset, length))
        try:
            with open(self._path(digest), encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or "meta" not in data:
            return None
        return Hit(data["meta"], lambda: data["documents"])

    def _read_docs(self, name: str, offset: int, length: int) -> Any:
        with open(self._packs / name, "rb") as f:
            f.seek(offset)
            return json.loads(f.read(length))

    def put_many(self, entries: Fresh) -> None:
        """Each entry in a file of its own; from ``PACK_FROM`` entries, one pack holding them all."""
        if self.folder is None or not entries:
            return
        if len(entries) >= PACK_FROM:
            gen = new_generation()
            self.write_index(gen, self.write_documents(entries, gen, 0))
            return
        for digest, (meta, documents) in entries.items():
            write_atomically(
                self._path(digest), json.dumps({"meta": meta, "documents": documents}, separators=(",", ":"))
            )

    def write_documents(self, entries: Fresh, gen: str, part: int) -> dict[str, Any]:
        """The documents of ``entries`` in pack ``gen``'s file ``part``; its index rows (none when
        it cannot be written: the cache is only slower)."""
        assert self.folder is not None
        name = f"{gen}-{part}.docs"
        rows, chunks, offset = {}, [], 0
        for digest, (meta, documents) in entries.items():
            text = json.dumps(documents, separators=(",", ":")).encode()
            rows[digest] = [meta, name, offset, len(text)]
            chunks.append(text)
            offset += len(text)
        return rows if write_atomically(self._packs / name, b"".join(chunks)) else {}

    def write_index(self, gen: str, rows: dict[str, Any]) -> None:
        """Pack ``gen``'s index; then only the newest ``PACKS_KEPT`` packs are kept."""
        if not rows:
            return
        text = json.dumps({"salt": self._salt, "entries": rows}, separators=(",", ":"))
        if not write_atomically(self._packs / f"{gen}.json", text):
            return
        for old in self._pack_files()[:-PACKS_KEPT]:
            old.unlink(missing_ok=True)
            for docs in self._packs.glob(f"{old.stem}-*.docs"):
                docs.unlink(missing_ok=True)
        if self._index is not None:
            self._index.update(rows)


def new_generation() -> str:
    """A new pack's name: its time, then the process (two loads at once never share one)."""
    return f"{time.time_ns():x}-{os.getpid()}"


def _salt() -> str:
    """What makes an old entry wrong: the cache's version and the published schema."""
    schema = json.dumps(published_schema("run"), sort_keys=True)
    return f"{CACHE_VERSION}:{hashlib.sha256(schema.encode()).hexdigest()[:16]}"


@dataclass
class LoadedFile:
    """One file: its hash, its valid runs (each with its document's index in the file), its
    problems; ``source``: its text, when it was parsed here (not for a file from the cache)."""

    path: str
    sha256: str
    entries: list[tuple[int, DesiredItem]] = field(default_factory=list)
    errors: list[FieldError] = field(default_factory=list)
    templated: bool = False
    source: Source | None = field(default=None, repr=False)

    @property
    def runs(self) -> list[DesiredItem]:
        return [r for _, r in self.entries]

    def text(self) -> Source:
        """The file's text (read again when it came from the cache), for positions."""
        if self.source is None:
            with open(self.path, "rb") as f:
                text = f.read().decode("utf-8-sig", errors="replace")
            self.source = Source(self.path, text, json=self.path.endswith(".json"))
        return self.source


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
    _load_files(loaded, files, cache)
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


class _Documents:
    """A cached file's documents, read from the cache once, when the first is wanted."""

    def __init__(self, path: str, count: int, read: Callable[[], Any]):
        self.path, self.count, self._read = path, count, read
        self._documents: list[Any] | None = None

    def at(self, k: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
        if self._documents is None:
            try:
                documents = self._read()
            except (OSError, ValueError):
                documents = None
            if not isinstance(documents, list) or len(documents) != self.count:
                raise PlanError(
                    f"{self.path}: its documents are gone from the load cache (cleared while planning?): "
                    "plan again"
                )
            self._documents = documents
        document, normalized = self._documents[k]
        return document, normalized


def _from_cache(loaded: Loaded, name: str, sha: str, hit: Hit | None) -> bool:
    """Take ``name``'s runs from the cache, when it has an entry for them that holds here."""
    if hit is None:
        return False
    meta = hit.meta
    if meta.get("template") != loaded.template or (
        meta.get("templated") and meta.get("templates") != loaded.templates
    ):
        return False
    runs = meta["runs"]
    documents = _Documents(name, len(runs), hit.documents)
    entries = [
        (index, DesiredItem(run, None, name, None, digest, fetch=partial(documents.at, k)))
        for k, (index, run, digest) in enumerate(runs)
    ]
    loaded.files[name] = LoadedFile(name, sha, entries, [], bool(meta.get("templated")))
    return True


def _fill_cache(loaded: Loaded, names: list[str], cache: FileCache) -> None:
    """Load ``names`` on every core into the cache: each process writes its share's documents
    (in one pack when there are ``PACK_FROM`` or more, whose index is written here)."""
    gen = new_generation() if len(names) >= PACK_FROM else None
    work = partial(_cache_share, loaded.template, loaded.templates, cache.folder, gen)
    rows: dict[str, Any] = {}
    try:
        for part in on_every_core(work, split(names)):
            rows.update(part)
    except Exception:
        pass  # whatever is not in the cache now is loaded in this process
    if gen is not None:
        cache.write_index(gen, rows)


def _cache_share(
    template: str | None,
    templates: dict[str, str],
    folder: Path,
    gen: str | None,
    part: int,
    names: list[str],
) -> dict[str, Any]:
    """One process's share, loaded and written to the cache; its pack index rows (if a pack)."""
    share = Loaded([], template, (), templates=templates)
    for name in names:
        try:
            with open(name, "rb") as f:
                share.files[name] = LoadedFile(name, hashlib.sha256(f.read()).hexdigest())
        except OSError:
            share.files[name] = LoadedFile(name, "")
    fresh = _load_here(share, names)
    cache = FileCache(folder)
    if gen is None:
        cache.put_many(fresh)
        return {}
    return cache.write_documents(fresh, gen, part)


def _load_files(loaded: Loaded, names: list[str], cache: FileCache | None, *, parallel: bool = True) -> None:
    """Load ``names`` into ``loaded``: from the cache where it holds them, else here (on every
    core when many), the new ones written to the cache."""
    use_cache = cache is not None and cache.folder is not None and not loaded.sets
    hashes = cache.hashes if cache is not None else StatHashes(None)
    missed: list[str] = []
    for name in names:
        try:
            digest, _ = hashes.sha256(name)
        except OSError:
            loaded.files[name] = LoadedFile(name, "")
            missed.append(name)  # load_desired says what is wrong with it
            continue
        if not (use_cache and cache is not None and _from_cache(loaded, name, digest, cache.get(digest))):
            loaded.files[name] = LoadedFile(name, digest)
            missed.append(name)
    hashes.save()
    if not missed or cache is None:
        if missed:
            _load_here(loaded, missed)
        return
    if parallel and use_cache and forkable(len(missed), PARALLEL_FROM):
        # many files not in the cache (a cold plan): loaded into the cache on every core, then
        # taken from it here as a warm load would; what is still missing is loaded below
        _fill_cache(loaded, missed, cache)
        missed = [
            n
            for n in missed
            if not (sha := loaded.files[n].sha256) or not _from_cache(loaded, n, sha, cache.get(sha))
        ]
        if not missed:
            return
    fresh = _load_here(loaded, missed)
    if use_cache:
        cache.put_many(fresh)


def _load_here(loaded: Loaded, names: list[str]) -> Fresh:
    """Load, render and validate ``names`` (each already in ``loaded.files`` with its hash) in
    this process; the cache entries of those without problems, by content hash."""
    desired = load_desired(names, template=loaded.template, sets=loaded.sets)
    by_file = {n: loaded.files[n] for n in names}
    for run in desired.runs:
        f = by_file.get(run.document.source.name)
        if f is not None:
            normalized = normalize(run.data)
            h = doc_digest(normalized)
            # kept only when it reads back from JSON as it is (``h`` is None otherwise)
            item = DesiredItem(run.name or "", run.data, f.path, normalized if h else None, h)
            f.entries.append((run.document.index, item))
            f.source = run.document.source
            f.templated = f.templated or run.template is not None
    leftover = []
    for e in desired.errors:
        if e.file in by_file:
            by_file[e.file].errors.append(e)
        else:
            leftover.append(e)  # the command line's, or a template file's
    fresh: Fresh = {}
    for f in by_file.values():
        f.errors += leftover  # each file of the batch keeps them, so a refresh cannot lose them
        if not f.errors and f.sha256:
            meta = {
                "template": loaded.template,
                "templated": f.templated,
                "templates": loaded.templates if f.templated else None,
                "runs": [[i, r.name, r.digest] for i, r in f.entries],
            }
            fresh[f.sha256] = (meta, [[r.document, r.normalized] for _, r in f.entries])
    return fresh


def _finish(loaded: Loaded) -> None:
    """Gather every problem and check that run names are unique across the source."""
    errors = list(loaded.base_errors)
    runs: dict[str, tuple[DesiredItem, LoadedFile, int]] = {}
    for f in loaded.files.values():
        errors += f.errors
        for index, run in f.entries:
            first = runs.get(run.name)
            if first is None:
                runs[run.name] = (run, f, index)
                continue
            _, other, at = first
            text = (
                f"run name '{run.name}' is also used in {_where(other, at)}: "
                "run names must be unique in a source"
            )
            line, column = f.text().locate(index, _NAME)
            errors.append(FieldError(ErrorType.duplicate, _NAME, text, f.path, line, column))
    unique = {(e.file, e.line, e.column, str(e.path), e.message): e for e in errors}
    loaded.errors = sorted(unique.values(), key=lambda e: e.sort_key())
    loaded.runs = {} if loaded.errors else {n: r for n, (r, _, _) in sorted(runs.items())}


def _where(f: LoadedFile, index: int) -> str:
    line, column = f.text().locate(index, _NAME)
    return f"{f.path}:{line}:{column}"


def default_cache() -> FileCache:
    """The cache under ``$ASTRA_HOME/cache``, else ``.astra/cache``."""
    from .state import astra_home

    return FileCache(astra_home() / "cache")
