"""What a load gives: ``Loaded`` (a source's files, its runs by name, every problem) and
``LoadedFile``; ``finish(loaded)`` gathers the problems and checks that run names are unique.

Plain data: nothing here reads a file but ``LoadedFile.text()`` (a file's text again, for the
position of a duplicate name). Must not touch: the cache, clusters, the plan.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from json.encoder import encode_basestring_ascii as _json_string
from pathlib import Path
from typing import TYPE_CHECKING

from ..runs import DesiredItem
from ..runspec.errors import FieldError
from ..runspec.paths import FieldPath
from ..runspec.unique import duplicate_names

if TYPE_CHECKING:
    from ..runspec.loading import FileText

__all__ = ["Loaded", "LoadedFile", "display_name", "finish"]

_NAME = FieldPath.root().child("metadata", "name")


@dataclass
class LoadedFile:
    """One file: its hash, its valid runs (each with its document's index in the file), its
    problems; ``source``: its text, when it was parsed here (not for a file from the cache)."""

    path: str
    sha256: str
    entries: list[tuple[int, DesiredItem]] = field(default_factory=list)
    errors: list[FieldError] = field(default_factory=list)
    templated: bool = False
    source: FileText | None = field(default=None, repr=False)

    @property
    def runs(self) -> list[DesiredItem]:
        return [r for _, r in self.entries]

    def text(self) -> FileText:
        """The file's text (read again when it came from the cache), for positions."""
        from ..runspec.loading import FileText

        if self.source is None:
            with open(self.path, "rb") as f:
                text = f.read().decode("utf-8-sig", errors="replace")
            self.source = FileText(self.path, text, json=self.path.endswith(".json"))
        return self.source


@dataclass
class Loaded:
    """A source's files as loaded: every file, the runs by name, every problem.

    ``taken``: how many files each route gave (``cache``: the load cache answered, the file not
    even parsed; ``shares``: loaded or looked up by the forked shares of a cold load; ``here``:
    loaded in this process), so that a caller (and a test) sees which path a load took."""

    paths: list[str]
    template: str | None
    sets: tuple[str, ...]
    files: dict[str, LoadedFile] = field(default_factory=dict)
    templates: dict[str, str] = field(default_factory=dict)  # template file → sha256
    base_errors: list[FieldError] = field(default_factory=list)  # not of one file: paths, flags
    runs: dict[str, DesiredItem] = field(default_factory=dict)
    errors: list[FieldError] = field(default_factory=list)
    taken: Counter[str] = field(default_factory=Counter)
    #: the folders that hold the files (where a ``templates/`` folder may sit): kept so that a
    #: refresh fingerprints the templates without visiting every file
    parents: set[str] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        return not self.errors

    def hashes(self) -> dict[str, str]:
        """Every file the runs came from (and the templates, when one is used) → its sha256."""
        return self.hashes_of(self.files)

    def hashes_of(self, paths: Iterable[str]) -> dict[str, str]:
        """``hashes()`` of those files only (the templates too, when any file uses one)."""
        out = {p: self.files[p].sha256 for p in paths if p in self.files}
        if self.templated:
            out.update(self.templates)
        return dict(sorted(out.items()))

    @cached_property
    def file_of(self) -> dict[str, str]:
        """Each run's file, as ``files`` names it (the run's own ``file`` may be the name a
        snapshot shows it by: ``reconcile.shown_as``)."""
        return {run.name: path for path, f in self.files.items() for _, run in f.entries}

    @cached_property
    def templated(self) -> bool:
        """Whether any file is rendered from a template (made once, as ``revision``)."""
        return any(f.templated for f in self.files.values())

    @cached_property
    def revision(self) -> str:
        """One hash of everything loaded: the files, the templates, ``--template`` and ``--set``
        (made once: a ``Loaded`` does not change once loaded; ``refresh`` makes a new one).

        It is the sha256 of ``json.dumps([hashes(), templates, template, sets], sort_keys=True)``,
        put together from each file's piece (``hash_texts``), which a refresh carries over
        (``carry``): a watch's pass of one changed file does not encode every file."""
        pieces = self.hash_texts
        if self.templated:
            pieces = dict(sorted({**pieces, **{p: _piece(p, h) for p, h in self.templates.items()}}.items()))
        rest = json.dumps([self.templates, self.template, list(self.sets)], sort_keys=True)
        text = "[{" + ", ".join(pieces.values()) + "}, " + rest[1:]
        return hashlib.sha256(text.encode()).hexdigest()

    @cached_property
    def hash_texts(self) -> dict[str, str]:
        """Each file's ``"path": "sha256"`` as ``json.dumps`` writes it, in the order of the paths."""
        return {p: _piece(p, f.sha256) for p, f in sorted(self.files.items())}

    def carry(self, previous: Loaded, changed: Iterable[str], *, same_runs: bool) -> None:
        """Take from ``previous`` what it made once, this being ``previous`` with the ``changed``
        files read again, added or dropped, rather than visit every file: ``hash_texts`` (the
        changed files' made again), ``templated``, and ``file_of`` when every file holds the
        runs it held (``same_runs``)."""
        made = previous.__dict__
        changed = list(changed)
        if "hash_texts" in made:
            texts = dict(previous.hash_texts)
            added = False
            for path in changed:
                f = self.files.get(path)
                if f is None:
                    texts.pop(path, None)
                else:
                    added = added or path not in texts
                    texts[path] = _piece(path, f.sha256)
            self.__dict__["hash_texts"] = dict(sorted(texts.items())) if added else texts
        if made.get("templated") is False:  # (when it was, any file may be the last that is)
            self.__dict__["templated"] = any(p in self.files and self.files[p].templated for p in changed)
        if same_runs and "file_of" in made:
            self.__dict__["file_of"] = previous.file_of

    def names_in(self, files: Iterable[str]) -> set[str]:
        """The runs the given files hold."""
        return {r.name for f in files if f in self.files for r in self.files[f].runs}


def _piece(path: str, sha256: str) -> str:
    return f"{_json_string(path)}: {_json_string(sha256)}"


def finish(loaded: Loaded, previous: Loaded | None = None, changed: Iterable[str] = ()) -> bool:
    """Gather every problem and check that run names are unique across the source (as
    ``astra validate`` does: ``reconciler.runspec.unique.duplicate_names``).

    ``previous`` and ``changed``: ``loaded`` is ``previous`` with the ``changed`` files read
    again. When ``previous`` had no problem, the changed files have none and hold the same
    run names as before, no name can clash that did not: the runs are ``previous``'s with
    those files' runs put in (the watch loop's pass, without visiting every file); whether it
    took that short way."""
    if previous is not None and _same_names(loaded, previous, changed):
        kept = dict(previous.runs)
        for name in changed:
            for _index, item in loaded.files[name].entries:
                kept[item.name] = item
        loaded.errors, loaded.runs = [], kept
        return True
    errors = list(loaded.base_errors)
    for f in loaded.files.values():
        if f.errors:
            errors += f.errors
    items = [run for f in loaded.files.values() for _index, run in f.entries]
    runs = {run.name: run for run in items}
    if len(runs) != len(items):  # a name used twice: where (and then there are no runs)
        order = [(run.name, f.path, index) for f in loaded.files.values() for index, run in f.entries]
        errors += duplicate_names(order, lambda file, index: loaded.files[file].text().locate(index, _NAME))
    unique = {(e.file, e.line, e.column, str(e.path), e.message): e for e in errors}
    loaded.errors = sorted(unique.values(), key=lambda e: e.sort_key())
    loaded.runs = {} if loaded.errors else dict(sorted(runs.items()))
    return False


def _same_names(loaded: Loaded, previous: Loaded, changed: Iterable[str]) -> bool:
    if previous.errors or loaded.base_errors:
        return False
    for name in changed:
        now, before = loaded.files.get(name), previous.files.get(name)
        if now is None or before is None or now.errors:
            return False
        if [r.name for _, r in now.entries] != [r.name for _, r in before.entries]:
            return False
    return True


def display_name(changed: str | os.PathLike[str], loaded: Loaded) -> str | None:
    """The name ``find_files`` gives ``changed`` under the loaded paths, or ``None`` (outside
    them, or hidden)."""
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
