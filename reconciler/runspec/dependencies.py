"""``spec.depends_on`` across the files given: every run named is among them, and no cycle.

``dependency_errors(edges, names)``: ``edges`` are each dependency of a valid run, ``(run, file,
line, column, index, other)`` (``index``: its place in ``depends_on``; line and column: of its
``run`` value), ``names`` every run the files hold. One error at each dependency on a run the
files do not hold (``no run named 'x' among the files given``), and one at the first dependency
of each cycle (``runs a → b → a wait for each other: a cycle``), so ``astra validate`` refuses a
chain that could never start.

``chain(name, documents)``: the chain of one run as ``describe`` and the console's run page show
it: each run it waits for (the run, ``when``, that run's state: ``None`` when it does not exist),
and the runs that wait for it. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, NamedTuple

from .errors import ErrorType, FieldError
from .paths import FieldPath

__all__ = ["Chain", "Edge", "chain", "dependency_errors"]

#: (run, file, line, column, index in depends_on, the run it depends on)
Edge = tuple[str, str, int | None, int | None, int, str]


def _path(index: int) -> FieldPath:
    return FieldPath.root().child("spec", "depends_on").index(index).child("run")


def dependency_errors(edges: Sequence[Edge], names: Collection[str]) -> list[FieldError]:
    """Unknown runs and cycles among ``edges`` (see the module docstring)."""
    errors = []
    after: dict[str, list[Edge]] = {}
    for e in edges:
        run, file, line, column, index, other = e
        if other not in names:
            text = f"no run named '{other}' among the files given: depends_on names a run of the same files"
            errors.append(FieldError(ErrorType.not_supported, _path(index), text, file, line, column))
        else:
            after.setdefault(run, []).append(e)
    said: set[frozenset[str]] = set()
    for start in sorted(after):
        cycle = _cycle_from(start, after)
        if cycle is None or frozenset(cycle) in said:
            continue
        said.add(frozenset(cycle))
        _, file, line, column, index, _ = next(e for e in after[start] if e[5] == cycle[1 % len(cycle)])
        chain = " → ".join([*cycle, start])
        errors.append(
            FieldError(
                ErrorType.invalid,
                _path(index),
                f"runs {chain} wait for each other: a cycle",
                file,
                line,
                column,
            )
        )
    return errors


def _cycle_from(start: str, after: dict[str, list[Edge]]) -> list[str] | None:
    """The runs of a cycle through ``start`` (``start`` first), or ``None``."""
    path = [start]
    seen = {start}

    def visit(name: str) -> bool:
        for e in after.get(name, ()):
            other = e[5]
            if other == start:
                return True
            if other not in seen:
                seen.add(other)
                path.append(other)
                if visit(other):
                    return True
                path.pop()
        return False

    return path if visit(start) else None


class Chain(NamedTuple):
    """One run's dependencies: ``needs`` (other run, when, its state or ``None``: no such run)
    and ``waited_by`` (the runs whose ``depends_on`` names it, each with its ``when``)."""

    needs: list[tuple[str, str, str | None]]
    waited_by: list[tuple[str, str]]


def _deps(document: Mapping[str, Any]) -> list[tuple[str, str]]:
    found = (document.get("spec") or {}).get("depends_on") or []
    return [(d["run"], d.get("when") or "Completed") for d in found if isinstance(d, Mapping)]


def chain(name: str, documents: Mapping[str, tuple[Mapping[str, Any], str]]) -> Chain:
    """The chain of run ``name`` among ``documents`` (each run's name → its document, its state)."""
    mine = documents.get(name)
    needs = [
        (other, when, documents[other][1] if other in documents else None)
        for other, when in (_deps(mine[0]) if mine else [])
    ]
    waited_by = sorted(
        (other, when) for other, (doc, _) in documents.items() for dep, when in _deps(doc) if dep == name
    )
    return Chain(needs, waited_by)
