"""Checking files and folders for ``astra validate``: every problem, on every core.

``check(paths, template=…, sets=…)`` is ``load_desired`` reduced to what validate reports: the
problems, and which documents and files were read; then, as the plan's load does, that run names
are unique across the files (``reconciler.runspec.unique.duplicate_names``: the same words,
naming both files) and that each ``spec.depends_on`` names a run of the files, with no cycle
(``runspec.dependencies``, from the edges each chunk found in its files: no file is read
again), so that a CI gate built on validate refuses what plan would refuse. One
file's problems never depend on another's, so for many files (``PARALLEL_FROM``) one process per
core, forked after the imports so each starts warm, takes them ``CHUNK`` at a time in turn (as a
cold load does, ``Turns.cut``: a process slowed down takes fewer, the last chunks are smaller,
and only a chunk's documents are alive at once: about 75 MiB at 100,000 files, where holding
them all took 540); each chunk's answers (and each valid run's name) come back with its number,
and are merged in the chunks' order: as one process would find them, without sorting. Flags
that speak about all files at once (``--template``, ``--set``) keep the work in one process.
Measured in ``task bench`` (validate against its floors).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .cores import Turns, forkable, on_every_core
from .runspec.dependencies import Edge, dependency_errors
from .runspec.errors import FieldError
from .runspec.loading import Document
from .runspec.paths import FieldPath
from .runspec.unique import duplicate_names
from .runspec.validate import find_files

__all__ = ["PARALLEL_FROM", "Checked", "check"]

_NAME = FieldPath.root().child("metadata", "name")
_DEPENDS_ON = FieldPath.root().child("spec", "depends_on")

#: Below this many files, one process is faster than starting others.
PARALLEL_FROM = 500
#: The processes take this many files at a time, in turn (``reconciler.cores.Turns``): a process
#: slowed down takes fewer, and only one chunk's documents are alive at once in each. Small
#: enough that they stay in the caches the two processes share (in one process, 1,000 at a time
#: cost 5% more a document than 100; 5,000, 10%).
CHUNK = 100


@dataclass
class Checked:
    errors: list[FieldError]
    documents: int = 0
    files: set[str] = field(default_factory=set)
    #: each valid run's (name, file, document index)
    runs: list[tuple[str, str, int]] = field(default_factory=list)
    #: the valid runs' warnings (``reconciler.runspec.lint``), placed
    warnings: list[FieldError] = field(default_factory=list)
    #: each ``spec.depends_on`` entry of the files with a valid run (``runspec.dependencies.Edge``)
    edges: list[Edge] = field(default_factory=list)


def check(
    paths: Iterable[str | os.PathLike[str]],
    *,
    template: str | None = None,
    sets: Sequence[str] = (),
    parallel: bool = True,
) -> Checked:
    """Every problem of the files and folders, sorted; how many documents and files were read
    (``parallel=False``: in this process only)."""
    files, errors = find_files(paths)
    if template or sets or not parallel or not forkable(len(files), PARALLEL_FROM):
        done = _merged([_check(0, [(0, files)], template, tuple(sets))], [files])
    else:
        turns = Turns.cut(files, CHUNK)
        try:
            done = _merged(on_every_core(_check_turns, turns.shares()), turns.chunks)
        finally:
            turns.close()
    found = errors + done.errors + _duplicates(done.runs) + _dependencies(done)
    done.errors = sorted(found, key=lambda e: e.sort_key())
    failing = {e.file for e in done.errors}  # a file with errors: those first, then its warnings
    done.warnings = sorted((w for w in done.warnings if w.file not in failing), key=lambda e: e.sort_key())
    return done


#: What a chunk's check answers (``_check``), named by the places of its files in the chunk:
#: its errors, how many documents, the files that gave none, each valid run's name, file and
#: document index, the warnings, and the dependency edges. Plain lists, not the files' names
#: again: a share's answer is pickled to the process that merges them (the names cost it 2.5 ms
#: at 10,000 files).
_Found = tuple[
    list[FieldError], int, list[int], list[str], list[int], list[int], list[FieldError], list[Edge]
]


def _merged(parts: list[list[tuple[int, _Found]]], chunks: Sequence[list[str]]) -> Checked:
    """The chunks' answers as one, in the chunks' order: the runs in the files' order, as one
    process loading them in turn would find them (no sort: 40 ms at 100,000 files)."""
    done = Checked([])
    for number, found in sorted((chunk for part in parts for chunk in part), key=lambda n: n[0]):
        errors, documents, unread, names, spots, indexes, warnings, edges = found
        files = chunks[number]
        done.errors += errors
        done.documents += documents
        if unread:
            skipped = set(unread)
            done.files.update(f for i, f in enumerate(files) if i not in skipped)
        else:  # every file gave a document (nearly always)
            done.files.update(files)
        done.runs += zip(names, [files[i] for i in spots], indexes, strict=True)
        done.warnings += warnings
        done.edges += edges
    return done


def _duplicates(runs: list[tuple[str, str, int]]) -> list[FieldError]:
    """The plan's load's check that run names are unique, with the same words."""
    from .runspec.loading import FileText

    sources: dict[str, FileText] = {}

    def locate(file: str, index: int) -> tuple[int | None, int | None]:
        if file not in sources:
            with open(file, "rb") as f:
                text = f.read().decode("utf-8-sig", errors="replace")
            sources[file] = FileText(file, text, json=file.endswith(".json"))
        return sources[file].locate(index, _NAME)

    return duplicate_names(runs, locate)


def _dependencies(done: Checked) -> list[FieldError]:
    """``spec.depends_on`` across the files (``runspec.dependencies``), from the edges the
    chunks found, in the files' order."""
    edges = sorted(done.edges, key=lambda e: e[1])  # stable: each file's documents in order
    return dependency_errors(edges, {name for name, _, _ in done.runs}) if edges else []


def _edges(documents: Iterable[Document], files: set[str]) -> list[Edge]:
    """Each ``spec.depends_on`` entry of the documents of ``files``, placed at its ``run``."""
    edges: list[Edge] = []
    for doc in documents:
        spec = doc.data.get("spec") if isinstance(doc.data, dict) else None
        deps = spec.get("depends_on") if isinstance(spec, dict) else None
        if doc.name is None or not isinstance(deps, list) or doc.source.name not in files:
            continue
        for i, d in enumerate(deps):
            if isinstance(d, dict) and isinstance(d.get("run"), str):
                at = _DEPENDS_ON.index(i).child("run")
                line, column = doc.source.locate(doc.index, at)
                edges.append((doc.name, doc.source.name, line, column, i, d["run"]))
    return edges


def _check_turns(_share: int, turns: Turns) -> list[tuple[int, _Found]]:
    """One process's share: the chunks it takes in turn (see ``CHUNK``)."""
    return _check(_share, turns.numbered(), None, ())


def _check(
    _share: int, chunks: Iterable[tuple[int, list[str]]], template: str | None, sets: tuple[str, ...]
) -> list[tuple[int, _Found]]:
    """What validate reports of the files of each chunk (``_Found``), with the chunk's number;
    each loaded apart (only one chunk's documents are alive at once)."""
    from .desired import load_desired

    out = []
    for number, files in chunks:
        desired = load_desired(files, template=template, sets=sets, warnings=True, listed=True)
        read = {d.source.name for d in desired.documents}
        place = {name: i for i, name in enumerate(files)}
        runs = desired.runs
        found: _Found = (
            desired.errors,
            len(desired.documents),
            [i for i, name in enumerate(files) if name not in read],
            [r.name or "" for r in runs],
            [place[r.document.source.name] for r in runs],
            [r.document.index for r in runs],
            desired.warnings,
            _edges(desired.documents, {r.document.source.name for r in runs}),
        )
        out.append((number, found))
    return out
