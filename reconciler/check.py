"""Checking files and folders for ``astra validate``: every problem, on every core.

``check(paths, template=…, sets=…)`` is ``load_desired`` reduced to what validate reports: the
problems, and which documents and files were read. One file's problems never depend on
another's, so for many files (``PARALLEL_FROM``) the files are split over one process per core,
forked after the imports so each starts warm; the answers are merged and sorted as one run
would sort them. Flags that speak about all files at once (``--template``, ``--set``) keep the
work in one process. Measured in ``task bench`` (validate against its floors).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial

from .cores import forkable, on_every_core, split
from .runspec.errors import FieldError
from .runspec.validate import find_files

__all__ = ["PARALLEL_FROM", "Checked", "check"]

#: Below this many files, one process is faster than starting others.
PARALLEL_FROM = 500


@dataclass
class Checked:
    errors: list[FieldError]
    documents: int = 0
    files: set[str] = field(default_factory=set)


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
        done = _check(0, files, template, tuple(sets))
    else:
        parts = on_every_core(partial(_check, template=None, sets=()), split(files))
        done = Checked([e for part in parts for e in part.errors])
        for part in parts:
            done.documents += part.documents
            done.files |= part.files
    done.errors = sorted(errors + done.errors, key=lambda e: e.sort_key())
    return done


def _check(_share: int, files: list[str], template: str | None, sets: tuple[str, ...]) -> Checked:
    from .desired import load_desired

    desired = load_desired(files, template=template, sets=sets)
    names = {d.source.name for d in desired.documents}
    return Checked(desired.errors, len(desired.documents), names)
