"""The parallel load: a cold load of many files hashed and loaded on every core.

``fill_cache(loaded, names, cache)`` cuts ``names`` into chunks that one process a core takes
in turn (``reconciler.cores.Turns``: a process slowed by the plan's read-ahead beside it takes
fewer, and none waits for another at the end); each share reads each file once (the bytes
hashed are the bytes loaded), answers what the cache already knows and loads the rest, and
writes its part of one new pack. Each file is then taken as its cache entry gives it
(``cache.cached_file``, as from a warm cache), so the result is the load in one process
(``tests/plan/test_fast.py`` compares the two), digests only: a plan reads back the documents
it needs (``load.reread``). This process's share makes its files itself, while the others
still load; a forked share sends back each file's hash and entry as plain
lists (``_Plain``), and the hashes its ``StatHashes`` learned.

Before forking, one file is loaded here and thrown away (``_warm``): the imports, the compiled
schema and the caches that loading makes are then made once, not once a share.

When the shares cannot run (no fork, a share died), the names they did not answer are loaded
in this process (the plain path), and the reason is logged at debug level.

Must not touch: clusters, the plan, the source's state.
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path
from typing import Any

from ..cores import Turns, on_every_core
from ..hashes import StatHashes
from .cache import FileCache, cached_file, new_generation, usable
from .fresh import load_here
from .loaded import Loaded, LoadedFile

__all__ = ["PARALLEL_FROM", "fill_cache"]

log = logging.getLogger(__name__)

#: From this many files missing from the cache, they are loaded on every core (as validate does).
PARALLEL_FROM = 500
#: A share takes this many files at a time (their bytes and documents are then dropped): the
#: memory of a share does not grow with the files it loads, but for their small cache entries;
#: and the shares end within one chunk's time of each other.
CHUNK = 250

#: What a forked share answers for each file of a chunk, in the chunk's order: its hash, its runs'
#: ``[index, name, digest]`` and whether a template made them (what its cache entry holds); or
#: ``None``, a file the share did not take (see ``fill_cache``). Plain lists, by the chunk's
#: number, not objects by name: pickled back in a third of the time.
_Plain = tuple[str, list[list[Any]], bool] | None


def fill_cache(loaded: Loaded, names: list[str], cache: FileCache) -> dict[str, LoadedFile]:
    """Hash ``names`` on every core, and load the ones the cache does not know: the files the
    shares took, in the order of ``names``, each as a usable cache entry gives it (its runs
    with their digests; a plan reads back the documents it needs, ``load.reread``: kept here,
    those of 100,000 unchanged runs held about 440 MiB). A file not taken (it has
    problems, or a run without a digest) is not there: the caller loads it in its turn. The new
    entries go into the cache (one pack when many), and the hashes learned into
    ``cache.hashes``."""
    if names:
        _warm(loaded, names[0])
    work = partial(_cache_share, loaded.template, loaded.templates, cache.folder, new_generation())
    taken: dict[str, LoadedFile] = {}
    wrote = False
    try:
        turns = Turns.cut(names, CHUNK)
        try:
            answers = on_every_core(work, turns.shares())
        finally:
            turns.close()
        here: dict[str, LoadedFile] = {}
        plain: dict[int, list[_Plain]] = {}
        for files, numbered, written, learned in answers:
            here.update(files)
            plain.update(numbered)
            wrote = wrote or written
            cache.hashes.learn(learned)
        for number, chunk in enumerate(turns.chunks):  # in the order of names
            answered = plain.get(number)
            if answered is None:  # this process's
                taken.update((name, here[name]) for name in chunk if name in here)
                continue
            for name, got in zip(chunk, answered, strict=True):
                if got is not None:
                    taken[name] = cached_file(name, *got)
    except Exception as exc:  # a fork or a share failed: whatever was not taken is loaded here
        log.debug(
            "parallel load: the shares failed (%s: %s): %d of %d files are loaded in this process",
            type(exc).__name__,
            exc,
            len(names) - len(taken),
            len(names),
        )
    if wrote:
        cache.prune_packs()
    return taken


def _warm(loaded: Loaded, name: str) -> None:
    """Load one file here, for nothing but what loading makes on its way (the loader's and the
    YAML parser's imports, the schema's compiled validator, the caches of its rules): the shares
    forked next start with them, rather than each making its own (30 ms of CPU a share). What
    it loads is thrown away: its share loads the file again."""
    probe = Loaded([], loaded.template, loaded.sets, templates=loaded.templates)
    probe.files[name] = LoadedFile(name, "")  # no hash: no cache entry is made
    load_here(probe, [name], documents=False)


def _cache_share(
    template: str | None,
    templates: dict[str, str],
    folder: Path | None,
    generation: str,
    share_index: int,
    turns: Turns,
) -> tuple[dict[str, LoadedFile], list[tuple[int, list[_Plain]]], bool, dict[str, str]]:
    """One process's share: the files it took (from the cache, else loaded), whether it wrote
    the entries it made (its part of the pack ``generation``), and what its ``StatHashes``
    remembered. The share of this process (``on_every_core`` runs share 0 here) gives its files
    as ``LoadedFile``s (made while the others load, not after); a forked share gives each
    chunk's as plain lists (``_Plain``), by the chunk's number. Each file is read once: the
    bytes hashed are the bytes loaded. The share goes one chunk (``turns.numbered()``) at a
    time, so that only one chunk's bytes and documents are alive at once: what is kept of each
    file is its small cache entry.

    Over 60 lines with its parameters (one a line) and this docstring: the share's loop reads, hashes,
    loads and caches in one place so that the bytes hashed are the bytes loaded."""
    cache, hashes = FileCache(folder), StatHashes(None)
    made: dict[str, dict[str, Any]] = {}
    here = share_index == 0
    taken: dict[str, LoadedFile] = {}
    numbered: list[tuple[int, list[_Plain]]] = []
    for number, chunk in turns.numbered():
        share = Loaded([], template, (), templates=templates)
        got: dict[str, tuple[str, Any]] = {}
        missed = []
        contents: dict[str, bytes] = {}
        for name in chunk:
            try:
                data, sha = hashes.read(name)
            except OSError:
                data, sha = None, ""  # load_desired says what is wrong with it
            entry = cache.get(sha) if sha else None
            if entry is not None and usable(share, entry):
                got[name] = (sha, entry)
            else:
                share.files[name] = LoadedFile(name, sha)
                missed.append(name)
                if data is not None:
                    contents[name] = data
        if missed:
            fresh = load_here(share, missed, contents, documents=False)
            made.update(fresh)
            for n in missed:
                sha = share.files[n].sha256
                entry = fresh.get(sha)
                got[n] = (sha, entry if entry is not None and usable(share, entry) else None)
        if here:
            for name in chunk:
                sha, entry = got[name]
                if entry is not None:
                    taken[name] = cached_file(name, sha, entry["runs"], bool(entry.get("templated")))
        else:
            plain: list[_Plain] = []
            for name in chunk:
                sha, entry = got[name]
                plain.append(None if entry is None else (sha, entry["runs"], bool(entry.get("templated"))))
            numbered.append((number, plain))
    return taken, numbered, cache.put_part(made, generation, share_index), hashes.remembered()
