"""Run names are unique across what is loaded together: ``duplicate_names``.

The plan's load (``load.loaded.finish``) and ``astra validate`` (``reconciler.check``) both ask
it, so they say the same. A module of its own, small: validate's start-up imports it, and none of
``reconciler.runs``'s classes (2 ms).

Must not touch: files (``locate`` places a name), anything but the spec layer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .errors import ErrorType, FieldError
from .paths import FieldPath

__all__ = ["duplicate_names"]

_NAME = FieldPath.root().child("metadata", "name")


def duplicate_names(
    runs: Iterable[tuple[str, str, int]], locate: Callable[[str, int], tuple[int | None, int | None]]
) -> list[FieldError]:
    """Run names must be unique across what is loaded together: one error at each later use of a
    name, naming where it was used first. ``runs``: each valid run's ``(name, file, document
    index)`` in load order; ``locate(file, index)``: the line and column of that document's
    ``metadata.name`` (asked only for the names used twice). What ``astra validate`` and the
    plan's load both say."""
    runs = runs if isinstance(runs, list) else list(runs)
    names = [name for name, _, _ in runs]
    if len(set(names)) == len(names):  # none used twice (nearly always): a third of the loop's time
        return []
    first: dict[str, tuple[str, int]] = {}
    errors = []
    for name, file, index in runs:
        if name not in first:
            first[name] = (file, index)
            continue
        other, at = first[name]
        line, column = locate(other, at)
        text = (
            f"run name '{name}' is also used in {other}:{line}:{column}: run names must be unique in a source"
        )
        errors.append(FieldError(ErrorType.duplicate, _NAME, text, file, *locate(file, index)))
    return errors
