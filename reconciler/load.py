"""The load step of plan, apply and watch: files → the desired runs of a source, or every problem.

``load_source(paths, template=, sets=, cache=)`` finds the files (as ``astra validate`` does),
reads and hashes each (sha256 of its bytes), and loads, renders and validates the ones the
cache does not know (``reconciler.desired.load_desired``). Then it checks that run names are
unique across the source; a clash names both files.

``Loaded.ok`` is false when anything failed: callers must then stop. A failed load is never an
empty (or partial) desired set, so nothing is ever pruned because a file did not load.

``refresh(loaded, changed)`` reloads only the changed files (the watch loop's fast path).

The cache (``FileCache``, under ``.astra/cache`` or ``$ASTRA_HOME/cache``): one JSON file per
content hash, holding that file's final run documents. An entry of a file that uses templates
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
from .spec.paths import FieldPath
from .spec.validate import SPEC_SUFFIXES, find_files, published_schema

__all__ = ["CACHE_VERSION", "FileCache", "Loaded", "LoadedFile", "default_cache", "load_source", "refresh"]

#: Bump when what a cache entry holds changes.
CACHE_VERSION = "1"
_NAME = FieldPath.root().child("metadata", "name")


class FileCache:
    """Final run documents by content hash, one JSON file each; ``folder=None`` caches nothing."""

    def __init__(self, folder: str | os.PathLike[str] | None):
        self.folder = Path(folder) if folder is not None else None
        self._salt = _salt()

    def _path(self, digest: str) -> Path:
        assert self.folder is not None
        return self.folder / digest[:2] / f"{digest}.json"

    def key(self, digest: str) -> str:
        return hashlib.sha256(f"{self._salt}:{digest}".encode()).hexdigest()

    def get(self, digest: str) -> dict[str, Any] | None:
        if self.folder is None:
            return None
        try:
            with open(self._path(self.key(digest)), encoding="utf-8") as f:
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


def _load_files(loaded: Loaded, names: list[str], cache: FileCache | None) -> None:
    use_cache = cache is not None and not loaded.sets
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
        if (
            entry is not None
            and entry.get("template") == loaded.template
            and (not entry.get("templated") or entry.get("templates") == loaded.templates)
        ):
            source = Source(name, data.decode("utf-8-sig"), json=name.endswith(".json"))
            entries = [
                (Document(source, i, d), DesiredItem(d["metadata"]["name"], d, name))
                for i, d in entry["documents"]
            ]
            loaded.files[name] = LoadedFile(name, digest, entries, [], bool(entry.get("templated")))
        else:
            loaded.files[name] = LoadedFile(name, digest)
            missed.append(name)
    if not missed:
        return
    desired = load_desired(missed, template=loaded.template, sets=loaded.sets)
    by_file = {n: loaded.files[n] for n in missed}
    for run in desired.runs:
        f = by_file.get(run.document.source.name)
        if f is not None:
            f.entries.append((run.document, DesiredItem(run.name or "", run.data, f.path)))
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
            cache.put(
                f.sha256,
                {
                    "template": loaded.template,
                    "templated": f.templated,
                    "templates": loaded.templates if f.templated else None,
                    "documents": [[d.index, r.document] for d, r in f.entries],
                },
            )


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
