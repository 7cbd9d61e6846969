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
from pathlib import Path

from .spec.errors import FieldError
from .spec.validate import find_files

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
    jobs: int | None = None,
) -> Checked:
    """Every problem of the files and folders, sorted; how many documents and files were read."""
    files, errors = find_files(paths)
    if jobs is None:
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if template or sets or jobs < 2 or len(files) < PARALLEL_FROM or not hasattr(os, "fork"):
        done = _check(files, template, tuple(sets))
    else:
        from concurrent.futures import ProcessPoolExecutor
        from multiprocessing import get_context

        chunks = [files[i::jobs] for i in range(jobs)]
        # the others go to forked processes; this one checks the first share meanwhile
        with ProcessPoolExecutor(jobs - 1, mp_context=get_context("fork")) as pool:
            others = [pool.submit(_check, chunk, None, ()) for chunk in chunks[1:]]
            parts = [_check(chunks[0], None, ()), *(f.result() for f in others)]
        done = Checked([e for part in parts for e in part.errors])
        for part in parts:
            done.documents += part.documents
            done.files |= part.files
    done.errors = sorted(errors + done.errors, key=lambda e: e.sort_key())
    return done


def _check(files: list[Path], template: str | None, sets: tuple[str, ...]) -> Checked:
    from .desired import load_desired

    desired = load_desired(files, template=template, sets=sets)
    names = {d.source.name for d in desired.documents}
    return Checked(desired.errors, len(desired.documents), names)
