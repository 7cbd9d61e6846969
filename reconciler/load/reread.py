"""The documents of runs that came from the load cache: ``documents(loaded, names)``.

A warm load gives each run with its digest only. Once the source's memory and the cluster are
observed, the runs the plan must compare are known; this reads their files again (each file
once, however many of its runs are wanted), loads and renders them, and gives each wanted run
as a ``DesiredItem`` with its document. What loading gives must be what the cache said it gave:
a file whose bytes or digests changed since the load is a ``PlanError`` (plan again). So the
documents are not validated again: the same bytes (their sha256) rendered to the same
documents (their digests) were valid when the load took them. Runs that have their documents
already are given as they are.

Must not touch: the cache's files, clusters, the plan.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable
from typing import Any

from ..runs import DesiredItem, PlanError
from ..runspec.normalize import normalized_digest
from .loaded import Loaded

__all__ = ["documents"]


def documents(loaded: Loaded, names: Collection[str]) -> dict[str, DesiredItem]:
    """``loaded.runs``, with a document for each of ``names`` (see the module docstring)."""
    wanted: dict[str, list[tuple[int, DesiredItem]]] = {}
    if not names:
        return loaded.runs
    paths: Iterable[str] = loaded.files
    if len(names) < len(loaded.files):  # a few runs (a watch's pass): only their files are looked at
        file_of = loaded.file_of
        paths = sorted({file_of[n] for n in names if n in file_of})
    for path in paths:
        for index, item in loaded.files[path].entries:
            if item.document is None and item.name in names and loaded.runs.get(item.name) is item:
                wanted.setdefault(path, []).append((index, item))
    if not wanted:
        return loaded.runs
    runs = dict(loaded.runs)
    for path, items in wanted.items():
        found = _reload(loaded, path)
        for index, item in items:
            made = found.get(index)
            if made is None or made[2] != item.digest:
                raise PlanError(f"{path} changed while it was being planned: plan again")
            runs[item.name] = DesiredItem(item.name, made[0], item.file, made[1], item.digest)
    return runs


def _reload(loaded: Loaded, path: str) -> dict[int, tuple[dict[str, Any], dict[str, Any], str | None]]:
    """Each valid document of ``path`` by its index: ``(document, normalized, digest)``; nothing
    when the file is not the one loaded (its sha256) or no longer loads without problems."""
    from ..desired import load_desired

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return {}
    if hashlib.sha256(data).hexdigest() != loaded.files[path].sha256:
        return {}
    desired = load_desired([path], template=loaded.template, contents={path: data}, checked=True)
    if desired.errors:
        return {}
    return {r.document.index: (r.data, *normalized_digest(r.data)) for r in desired.runs}
