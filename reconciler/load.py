"""The load step of plan, apply and watch: files → the desired runs of a source, or every problem.

``load_source(paths, template=, sets=, cache=)`` finds the files (as ``astra validate`` does),
reads and hashes each (sha256 of its bytes), and loads, renders and validates the ones the
cache does not know (``reconciler.desired.load_desired``). Then it checks that run names are
unique across the source; a clash names both files.

``Loaded.ok`` is false when anything failed: callers must then stop. A failed load is never an
empty (or partial) desired set, so nothing is ever pruned because a file did not load.

``refresh(loaded, changed)`` reloads only the changed files (the watch loop's fast path).

The cache (``FileCache``, under ``.astra/cache`` or ``$ASTRA_HOME/cache``) keeps, by a file's
content hash, what loading it found: each run's document index, name and the digest of its
normalised document (``reconciler.runspec.normalize``), and the template used. A warm load reads
no file: each run comes with its digest, and its document is read again from its file (and
rendered and validated again) only if the plan needs it, which a run whose digests all agree
never does. An entry of a file that uses templates also holds a fingerprint of every template
on the search path and is used only while that fingerprint holds. Only files without problems
are cached; ``--set`` bypasses the cache.

On disk: a load that misses fewer than ``PACK_FROM`` files writes one JSON file per file
content (``ab/<key>.json``); a larger one writes all of them in one *pack*,
``packs/<generation>-<part>.json`` (a cold plan, loaded on every core: each forked share writes
its part). Only the newest ``PACKS_KEPT`` packs are kept.
Beside them, ``stat.json`` remembers each file's content hash by its stat
(``reconciler.hashes``): a warm load does not even read a file that did not change.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .atomic import write_atomically
from .cores import forkable, on_every_core, split
from .hashes import StatHashes
from .plan.build import DesiredItem
from .plan.model import PlanError
from .runspec.errors import ErrorType, FieldError
from .runspec.files import SPEC_SUFFIXES, find_files, published_text
from .runspec.normalize import digest_owned, normalized_digest
from .runspec.paths import FieldPath

if TYPE_CHECKING:
    from .runspec.loading import Source

__all__ = ["CACHE_VERSION", "FileCache", "Loaded", "LoadedFile", "default_cache", "load_source", "refresh"]

#: Bump when what a cache entry holds changes.
CACHE_VERSION = "4"
_NAME = FieldPath.root().child("metadata", "name")


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
        except (OSError, ValueError):
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
                if write_atomically(path, json.dumps(entry, separators=(",", ":"))):
                    self._folders().add(path.parent.name)
            return
        if self.put_part(entries, new_generation(), 0):
            self.prune_packs()

    def put_part(self, entries: dict[str, dict[str, Any]], generation: str, part: int) -> bool:
        """One part of the pack ``generation`` (the forked shares of a cold load write one each;
        ``prune_packs`` after): whether it was written."""
        if self.folder is None or not entries:
            return False
        text = json.dumps({"salt": self._salt, "entries": entries}, separators=(",", ":"))
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
    return f"{CACHE_VERSION}:{hashlib.sha256(published_text('run').encode()).hexdigest()[:16]}"


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
        from .runspec.loading import Source

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

    @cached_property
    def revision(self) -> str:
        """One hash of everything loaded: the files, the templates, ``--template`` and ``--set``
        (made once: a ``Loaded`` does not change once loaded; ``refresh`` makes a new one)."""
        text = json.dumps([self.hashes(), self.templates, self.template, list(self.sets)], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def names_in(self, files: Iterable[str]) -> set[str]:
        """The runs the given files hold."""
        return {r.name for f in files if f in self.files for r in self.files[f].runs}


def _template_fingerprint() -> dict[str, str]:
    from .template_files import available, search_folders

    out = {}
    for path in available(search_folders()).values():
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
    meanwhile: Callable[[], None] | None = None,
    found: tuple[list[str], list[FieldError]] | None = None,
) -> Loaded:
    """Load a source's files (see the module docstring). ``meanwhile``: other work for this
    process, done while forked processes load the files, when they do (a cold load of many);
    not called otherwise. ``found``: ``find_files(paths)``, when the caller has it already."""
    loaded = Loaded([os.fspath(p) for p in paths], template, tuple(sets))
    loaded.templates = _template_fingerprint()
    files, loaded.base_errors = found if found is not None else find_files(paths)
    if cache is not None and cache.folder is not None:  # what was deleted since is forgotten
        cache.hashes.forget_under([os.fspath(p) for p in paths if os.path.isdir(p)], files)
    _load_files(loaded, files, cache, meanwhile=meanwhile)
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


class _Reloaded:
    """A cached file's documents, loaded again from the file the first time one is wanted (what
    loading it gives must be what the cache said it gave)."""

    def __init__(self, loaded: Loaded, path: str, sha: str, runs: list[list[Any]]):
        self.template, self.path, self.sha, self.runs = loaded.template, path, sha, runs
        self._found: dict[int, tuple[dict[str, Any], dict[str, Any]]] | None = None

    def at(self, k: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
        if self._found is None:
            from .desired import load_desired

            try:
                with open(self.path, "rb") as f:
                    same = hashlib.sha256(f.read()).hexdigest() == self.sha
            except OSError:
                same = False
            desired = load_desired([self.path], template=self.template) if same else None
            found = {} if desired is None else {r.document.index: r.data for r in desired.runs}
            made = {i: (found[i], *normalized_digest(found[i])) for i, _, _ in self.runs if i in found}
            if (
                desired is None
                or desired.errors
                or any(i not in made or made[i][2] != h for i, _, h in self.runs)
            ):
                raise PlanError(f"{self.path} changed while it was being planned: plan again")
            self._found = {i: (doc, normalized) for i, (doc, normalized, _) in made.items()}
        return self._found[self.runs[k][0]]


def _from_cache(loaded: Loaded, name: str, sha: str, entry: dict[str, Any] | None) -> bool:
    """Take ``name``'s runs from the cache, when it has an entry for them that holds here."""
    if (
        entry is None
        or entry.get("template") != loaded.template
        or (entry.get("templated") and entry.get("templates") != loaded.templates)
    ):
        return False
    runs = entry["runs"]
    again = _Reloaded(loaded, name, sha, runs)
    items = [
        (index, DesiredItem(run, None, name, None, digest, fetch=partial(again.at, k)))
        for k, (index, run, digest) in enumerate(runs)
    ]
    loaded.files[name] = LoadedFile(name, sha, items, [], bool(entry.get("templated")))
    return True


def _fill_cache(
    loaded: Loaded, names: list[str], cache: FileCache, meanwhile: Callable[[], None] | None
) -> dict[str, tuple[str, Any]]:
    """Hash ``names`` on every core, and load the ones the cache does not know: each name's
    content hash and cache entry (``None`` when it has problems). The new entries go into the
    cache (one pack when many), and the hashes learned into ``cache.hashes``."""
    work = partial(_cache_share, loaded.template, loaded.templates, cache.folder, new_generation())
    found: dict[str, tuple[str, Any]] = {}
    wrote = False
    with contextlib.suppress(Exception):  # whatever is not found now is loaded in this process
        for part, written, learned in on_every_core(work, split(names), meanwhile=meanwhile):
            found.update(part)
            wrote = wrote or written
            cache.hashes.learn(learned)
    if wrote:
        cache.prune_packs()
    return found


def _cache_share(
    template: str | None,
    templates: dict[str, str],
    folder: Path,
    generation: str,
    share_index: int,
    names: list[str],
) -> tuple[dict[str, tuple[str, Any]], bool, dict[str, str]]:
    """One process's share: each name's hash and cache entry (from the cache, else loaded),
    whether it wrote the entries it made (its part of the pack ``generation``), and what its
    ``StatHashes`` remembered. Each file is read once: the bytes hashed are the bytes loaded."""
    share = Loaded([], template, (), templates=templates)
    cache, hashes = FileCache(folder), StatHashes(None)
    found: dict[str, tuple[str, Any]] = {}
    missed = []
    contents: dict[str, bytes] = {}
    for name in names:
        try:
            data, sha = hashes.read(name)
        except OSError:
            data, sha = None, ""  # load_desired says what is wrong with it
        entry = cache.get(sha) if sha else None
        if entry is not None and _from_cache(share, name, sha, entry):
            found[name] = (sha, entry)
        else:
            share.files[name] = LoadedFile(name, sha)
            missed.append(name)
            if data is not None:
                contents[name] = data
    fresh = _load_here(share, missed, contents, documents=False) if missed else {}
    found.update((n, (share.files[n].sha256, fresh.get(share.files[n].sha256))) for n in missed)
    return found, cache.put_part(fresh, generation, share_index), hashes.remembered()


def _load_files(
    loaded: Loaded,
    names: list[str],
    cache: FileCache | None,
    *,
    parallel: bool = True,
    meanwhile: Callable[[], None] | None = None,
) -> None:
    """Load ``names`` into ``loaded``: from the cache where it holds them, else here (on every
    core when many), the new ones written to the cache. A file whose stat ``cache.hashes``
    does not remember is hashed first (on every core, when many), then looked up."""
    use_cache = cache is not None and cache.folder is not None and not loaded.sets
    hashes = cache.hashes if cache is not None else StatHashes(None)

    def cached(name: str, sha: str | None) -> bool:
        return bool(sha) and use_cache and _from_cache(loaded, name, sha, cache.get(sha))  # type: ignore[union-attr,arg-type]

    unknown: list[str] = []
    missed: list[str] = []
    for name in names:
        try:
            known = hashes.known(name)
        except OSError:
            known = ""  # load_desired says what is wrong with it
        if known is None:
            unknown.append(name)
        elif not cached(name, known):
            loaded.files[name] = LoadedFile(name, known)
            missed.append(name)
    if unknown and parallel and use_cache and cache is not None and forkable(len(unknown), PARALLEL_FROM):
        found = _fill_cache(loaded, unknown, cache, meanwhile)
        unknown = [n for n in unknown if not _from_cache(loaded, n, *found.get(n, ("", None)))]
    for name in unknown:
        try:
            sha = hashes.sha256(name)
        except OSError:
            sha = ""
        if not cached(name, sha):
            loaded.files[name] = LoadedFile(name, sha)
            missed.append(name)
    hashes.save()
    if missed:
        fresh = _load_here(loaded, missed)
        if use_cache and cache is not None:
            cache.put_many(fresh)


def _load_here(
    loaded: Loaded, names: list[str], contents: dict[str, bytes] | None = None, *, documents: bool = True
) -> dict[str, dict[str, Any]]:
    """Load, render and validate ``names`` (each already in ``loaded.files`` with its hash; its
    bytes in ``contents`` when read already) in this process; the cache entries of those
    without problems, by content hash. Without ``documents`` (a forked share, which only
    answers the cache entries) the runs keep only their digests, made in place."""
    from .desired import load_desired  # not needed by a load the cache answers

    desired = load_desired(names, template=loaded.template, sets=loaded.sets, contents=contents)
    by_file = {n: loaded.files[n] for n in names}
    made: dict[str, list[list[Any]]] = {n: [] for n in names}  # each file's [index, name, digest]s
    for run in desired.runs:
        f = by_file.get(run.document.source.name)
        if f is None:
            continue
        index, name = run.document.index, run.name or ""
        if documents:
            normalized, h = normalized_digest(run.data)
            # kept only when it reads back from JSON as it is (``h`` is None otherwise)
            f.entries.append((index, DesiredItem(name, run.data, f.path, normalized if h else None, h)))
        else:
            h = digest_owned(run.data)  # the document is not kept: cleaned in place, not copied
        made[f.path].append([index, name, h])
        f.source = run.document.source
        f.templated = f.templated or run.template is not None
    leftover = []
    for e in desired.errors:
        if e.file in by_file:
            by_file[e.file].errors.append(e)
        else:
            leftover.append(e)  # the command line's, or a template file's
    fresh: dict[str, dict[str, Any]] = {}
    for f in by_file.values():
        f.errors += leftover  # each file of the batch keeps them, so a refresh cannot lose them
        if not f.errors and f.sha256:
            entry: dict[str, Any] = {"runs": made[f.path]}
            if loaded.template is not None:
                entry["template"] = loaded.template
            if f.templated:  # used only while every template on the search path is as it was
                entry["templated"], entry["templates"] = True, loaded.templates
            fresh[f.sha256] = entry
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
