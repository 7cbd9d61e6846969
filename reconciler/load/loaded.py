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
from pathlib import Path
from typing import TYPE_CHECKING

from ..runs import DesiredItem, duplicate_names
from ..runspec.errors import FieldError
from ..runspec.paths import FieldPath

if TYPE_CHECKING:
    from ..runspec.loading import Source

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
    source: Source | None = field(default=None, repr=False)

    @property
    def runs(self) -> list[DesiredItem]:
        return [r for _, r in self.entries]

    def text(self) -> Source:
        """The file's text (read again when it came from the cache), for positions."""
        from ..runspec.loading import Source

        if self.source is None:
            with open(self.path, "rb") as f:
                text = f.read().decode("utf-8-sig", errors="replace")
            self.source = Source(self.path, text, json=self.path.endswith(".json"))
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


def finish(loaded: Loaded) -> None:
    """Gather every problem and check that run names are unique across the source (as
    ``astra validate`` does: ``reconciler.runs.duplicate_names``)."""
    errors = list(loaded.base_errors)
    runs: dict[str, DesiredItem] = {}
    order = []
    for f in loaded.files.values():
        errors += f.errors
        for index, run in f.entries:
            order.append((run.name, f.path, index))
            runs.setdefault(run.name, run)
    errors += duplicate_names(order, lambda file, index: loaded.files[file].text().locate(index, _NAME))
    unique = {(e.file, e.line, e.column, str(e.path), e.message): e for e in errors}
    loaded.errors = sorted(unique.values(), key=lambda e: e.sort_key())
    loaded.runs = {} if loaded.errors else dict(sorted(runs.items()))


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
