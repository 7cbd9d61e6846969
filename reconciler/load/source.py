"""The load step: files → the desired runs of a source, or every problem.

``load_source(paths, template=, sets=, cache=)`` finds the files (as ``astra validate`` does),
hashes each (sha256 of its bytes; remembered by stat in ``reconciler.hashes``), and takes each
from the load cache (``reconciler.load.cache``) when it knows the content, else loads, renders
and validates it (``reconciler.load.fresh``); many unknown files are hashed and loaded on every
core (``reconciler.load.parallel``). Then it checks that run names are unique across the
source; a clash names both files. ``Loaded.taken`` says how many files each route gave.

``Loaded.ok`` is false when anything failed: callers must then stop. A failed load is never an
empty (or partial) desired set, so nothing is ever pruned because a file did not load.

``refresh(loaded, changed)`` reloads only the changed files (the watch loop's fast path).
``default_cache()``: the cache under ``cache/`` in astra's home (``reconciler.home``).

Must not touch: clusters, the source's state (but its home folder), the plan.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence

from ..cores import forkable
from ..hashes import StatHashes
from ..runspec.errors import FieldError
from ..runspec.files import SPEC_SUFFIXES, find_files
from . import parallel
from .cache import FileCache, from_cache
from .fresh import load_here
from .loaded import Loaded, LoadedFile, display_name, finish

__all__ = ["default_cache", "load_source", "refresh"]


def _template_fingerprint(paths: Iterable[str | os.PathLike[str]], parents: Iterable[str]) -> dict[str, str]:
    """Every template file the spec files in the folders ``parents`` may use
    (``template_files.folders_for``) → its sha256."""
    from ..template_files import folders_for

    out = {}
    for folder in folders_for(paths, parents):
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue
        for path in entries:
            if path.suffix not in SPEC_SUFFIXES or path.name.startswith("."):
                continue
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
    found: tuple[list[str], list[FieldError]] | None = None,
) -> Loaded:
    """Load a source's files (see the module docstring). ``found``: ``find_files(paths)``, when
    the caller has it already. A cold load on every core keeps digests only, as the cache does
    (``load.parallel.fill_cache``): ``load.reread.documents`` reads back the documents a plan
    needs."""
    loaded = Loaded([os.fspath(p) for p in paths], template, tuple(sets))
    files, loaded.base_errors = found if found is not None else find_files(paths)
    loaded.parents = {os.path.dirname(f) for f in files}
    loaded.templates = _template_fingerprint(loaded.paths, loaded.parents)
    if cache is not None and cache.folder is not None:  # what was deleted since is forgotten
        cache.hashes.forget_under([os.fspath(p) for p in paths if os.path.isdir(p)], files)
    _load_files(loaded, files, cache)
    finish(loaded)
    return loaded


def refresh(
    loaded: Loaded, changed: Iterable[str | os.PathLike[str]], cache: FileCache | None = None
) -> Loaded:
    """``loaded`` with the changed files read again (new files added, deleted ones dropped).

    A change to a template reloads everything.
    """
    changed = [os.fspath(c) for c in changed]
    parents = loaded.parents | {os.path.dirname(c) for c in changed}
    fingerprint = _template_fingerprint(loaded.paths, parents)
    if fingerprint != loaded.templates:
        return load_source(loaded.paths, template=loaded.template, sets=loaded.sets, cache=cache)
    again = Loaded(loaded.paths, loaded.template, loaded.sets, dict(loaded.files), fingerprint)
    again.base_errors = list(loaded.base_errors)
    again.parents = parents
    wanted = []
    touched = []
    for c in changed:
        name = display_name(c, loaded)
        if name is None:
            continue
        touched.append(name)
        if os.path.isfile(name) and os.path.splitext(name)[1] in SPEC_SUFFIXES:
            wanted.append(name)
        else:
            again.files.pop(name, None)
    wanted = sorted(set(wanted))
    _load_files(again, wanted, cache)
    same_runs = False
    if again.files.keys() == loaded.files.keys():  # the same files: their order holds
        same_runs = finish(again, loaded, wanted)
    else:
        again.files = dict(sorted(again.files.items(), key=lambda kv: kv[0].split(os.sep)))
        finish(again)
    again.carry(loaded, touched, same_runs=same_runs)
    return again


def _load_files(loaded: Loaded, names: list[str], cache: FileCache | None) -> None:
    """Load ``names`` into ``loaded``: from the cache where it holds them, else here (on every
    core when many), the new ones written to the cache. A file whose stat ``cache.hashes``
    does not remember is hashed first (on every core, when many), then looked up."""
    use_cache = cache is not None and cache.folder is not None and not loaded.sets
    hashes = cache.hashes if cache is not None else StatHashes(None)

    def cached(name: str, sha: str | None) -> bool:
        if not sha or not use_cache or cache is None:
            return False
        if from_cache(loaded, name, sha, cache.get(sha)):
            loaded.taken["cache"] += 1
            return True
        return False

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
    if unknown and use_cache and cache is not None and forkable(len(unknown), parallel.PARALLEL_FROM):
        taken = parallel.fill_cache(loaded, unknown, cache)
        if taken:
            loaded.files.update(taken)
            loaded.taken["shares"] += len(taken)
            unknown = [n for n in unknown if n not in taken]
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
        loaded.taken["here"] += len(missed)
        fresh = load_here(loaded, missed)
        if use_cache and cache is not None:
            cache.put_many(fresh)


def default_cache() -> FileCache:
    """The cache under ``cache/`` in astra's home (``reconciler.home.astra_home``)."""
    from ..home import astra_home

    return FileCache(astra_home() / "cache")
