"""Loading files in this process: ``load_here(loaded, names)`` loads, renders and validates
them (``reconciler.desired.load_desired``) into ``loaded`` and gives the cache entries of those
without problems. What the plain path, the misses of a warm load and each forked share of a
cold load (``reconciler.load.parallel``) all call.

Must not touch: the cache's files (it only makes entries), clusters, the plan.
"""

from __future__ import annotations

from typing import Any

from ..runs import DesiredItem
from ..runspec.normalize import digest_owned, normalized_digest
from .loaded import Loaded

__all__ = ["load_here"]


def load_here(
    loaded: Loaded,
    names: list[str],
    contents: dict[str, bytes] | None = None,
    *,
    documents: bool = True,
) -> dict[str, dict[str, Any]]:
    """Load, render and validate ``names`` (each already in ``loaded.files`` with its hash; its
    bytes in ``contents`` when read already) in this process; the cache entries of those
    without problems, by content hash. Without ``documents`` (a forked share, which only
    answers the cache entries) the runs keep only their digests, made in place."""
    from ..desired import load_desired  # not needed by a load the cache answers

    desired = load_desired(names, template=loaded.template, sets=loaded.sets, contents=contents, listed=True)
    by_file = {n: loaded.files[n] for n in names}
    made: dict[str, list[list[Any]]] = {n: [] for n in names}  # each file's [index, name, digest]s
    for run in desired.runs:
        f = by_file.get(run.document.source.name)
        if f is None:
            continue
        index, name = run.document.index, run.name or ""
        if documents:
            normalized, h = normalized_digest(run.data)
            # kept only when it reads back from JSON as it is (``h`` is None otherwise)
            f.entries.append((index, DesiredItem(name, run.data, f.path, normalized if h else None, h)))
        else:
            h = digest_owned(run.data)  # the document is not kept: cleaned in place, not copied
        made[f.path].append([index, name, h])
        f.source = run.document.source
        f.templated = f.templated or run.template is not None
    leftover = []
    for e in desired.errors:
        if e.file in by_file:
            by_file[e.file].errors.append(e)
        else:
            leftover.append(e)  # the command line's, or a template file's
    fresh: dict[str, dict[str, Any]] = {}
    for f in by_file.values():
        f.errors += leftover  # each file of the batch keeps them, so a refresh cannot lose them
        if not f.errors and f.sha256:
            entry: dict[str, Any] = {"runs": made[f.path]}
            if loaded.template is not None:
                entry["template"] = loaded.template
            if f.templated:  # used only while every template on the search path is as it was
                entry["templated"], entry["templates"] = True, loaded.templates
            fresh[f.sha256] = entry
    return fresh
