"""The parallel load: a cold load of many files hashed and loaded on every core.

``fill_cache(loaded, names, cache)`` cuts ``names`` into chunks that one process a core takes
in turn (``reconciler.cores.Turns``: a process slowed by the plan's read-ahead beside it takes
fewer, and none waits for another at the end); each share reads each file once (the bytes
hashed are the bytes loaded), answers what the cache already knows and loads the rest, writes
its part of one new pack, and sends back each name's content hash and cache entry (``None``:
the file has problems), and the hashes its ``StatHashes`` learned. The caller then takes every file from
those entries as from a warm cache (``from_cache``), so the result is the load in one process:
``tests/plan/test_fast.py`` compares the two.

Before forking, one file is loaded here and thrown away (``_warm``): the imports, the compiled
schema and the caches that loading makes are then made once, not once a share.

When the shares cannot run (no fork, a share died), the names they did not answer are loaded
in this process (the plain path), and the reason is logged at debug level.

Must not touch: clusters, the plan, the source's state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from functools import partial
from pathlib import Path
from typing import Any

from ..cores import Turns, on_every_core
from ..hashes import StatHashes
from ..runs import DesiredItem
from .cache import FileCache, from_cache, new_generation
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

#: What tells the share of this process which runs the source's inventory holds: ``None`` until
#: it is known (``ReadAhead.held``, asked before each chunk). From then on, the runs it does not
#: hold, the plan's creates, keep their documents as they are loaded: the plan needs them, and
#: would read their files again otherwise (``load.reread``). The forked shares keep none: their
#: documents would cost more to send back than to read again.
Held = Callable[[], Collection[str] | None]


def fill_cache(
    loaded: Loaded, names: list[str], cache: FileCache, held: Held | None = None
) -> tuple[dict[str, tuple[str, Any]], dict[str, list[tuple[int, DesiredItem]]]]:
    """Hash ``names`` on every core, and load the ones the cache does not know: each name's
    content hash and cache entry (``None`` when it has problems). The new entries go into the
    cache (one pack when many), and the hashes learned into ``cache.hashes``. With ``held``
    (see ``Held``), also the runs this process loaded with their documents, by file."""
    if names:
        _warm(loaded, names[0])
    work = partial(_cache_share, loaded.template, loaded.templates, cache.folder, new_generation(), held)
    found: dict[str, tuple[str, Any]] = {}
    kept: dict[str, list[tuple[int, DesiredItem]]] = {}
    wrote = False
    try:
        turns = Turns.cut(names, CHUNK)
        try:
            for part, written, learned, documents in on_every_core(work, turns.shares()):
                found.update(part)
                kept.update(documents)
                wrote = wrote or written
                cache.hashes.learn(learned)
        finally:
            turns.close()
    except Exception as exc:  # a fork or a share failed: whatever was not found is loaded here
        log.debug(
            "parallel load: the shares failed (%s: %s): %d of %d files are loaded in this process",
            type(exc).__name__,
            exc,
            len(names) - len(found),
            len(names),
        )
    if wrote:
        cache.prune_packs()
    return found, kept


def _new(inventory: Collection[str]) -> Callable[[str], bool]:
    """Whether a run is not one ``inventory`` holds."""
    return lambda run: run not in inventory


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
    held: Held | None,
    share_index: int,
    turns: Turns,
) -> tuple[dict[str, tuple[str, Any]], bool, dict[str, str], dict[str, list[tuple[int, DesiredItem]]]]:
    """One process's share: each name's hash and cache entry (from the cache, else loaded),
    whether it wrote the entries it made (its part of the pack ``generation``), what its
    ``StatHashes`` remembered, and (the share of this process, with ``held``) the runs it kept
    with their documents, by file. Each file is read once: the bytes hashed are the bytes
    loaded. The share goes one chunk (``turns.taken()``) at a time, so that only one chunk's
    bytes and documents are alive at once: what is kept of each file is its small cache entry
    (and, in this process, the documents of runs the inventory does not hold)."""
    cache, hashes = FileCache(folder), StatHashes(None)
    found: dict[str, tuple[str, Any]] = {}
    made: dict[str, dict[str, Any]] = {}
    kept: dict[str, list[tuple[int, DesiredItem]]] = {}
    here = held if share_index == 0 else None  # share 0 runs in this process (on_every_core)
    for chunk in turns.taken():
        inventory = here() if here is not None else None
        share = Loaded([], template, (), templates=templates)
        missed = []
        contents: dict[str, bytes] = {}
        for name in chunk:
            try:
                data, sha = hashes.read(name)
            except OSError:
                data, sha = None, ""  # load_desired says what is wrong with it
            entry = cache.get(sha) if sha else None
            if entry is not None and from_cache(share, name, sha, entry):
                found[name] = (sha, entry)
            else:
                share.files[name] = LoadedFile(name, sha)
                missed.append(name)
                if data is not None:
                    contents[name] = data
        if missed:
            fresh = load_here(
                share, missed, contents, documents=False if inventory is None else _new(inventory)
            )
            found.update((n, (share.files[n].sha256, fresh.get(share.files[n].sha256))) for n in missed)
            made.update(fresh)
            if inventory is not None:
                kept.update((n, share.files[n].entries) for n in missed if share.files[n].entries)
    return found, cache.put_part(made, generation, share_index), hashes.remembered(), kept
