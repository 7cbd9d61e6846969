"""The diff: pair desired with live runs, then compare three ways over normalised documents.

``pair(desired, live)`` matches runs by name: ``(name, desired | None, live | None)``, sorted.

``compare(desired, live, last)`` is the three-way diff of one run (all three normalised,
``last`` the last-applied document or ``None``). It looks only at the fields this source
manages, the fields present in ``desired`` or ``last``: a field only the cluster set (a
server default, a server-owned field) is never a difference. For each managed field whose
live value differs from the desired one it yields a ``FieldChange`` (before = live, after =
desired), marked ``drift`` when the files did not change it since the last apply but the
cluster did. It also returns ``before``: the live document seen through the managed fields,
so that ``action_for(before, desired)`` is ``noop`` exactly when there are no field changes.

Maps are compared key by key, lists of equal length item by item, anything else as a whole.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from ..runspec.paths import FieldPath
from .model import ABSENT, FieldChange, forces_replace, same

__all__ = ["compare", "pair"]

D = TypeVar("D")
L = TypeVar("L")


def pair(desired: Mapping[str, D], live: Mapping[str, L]) -> list[tuple[str, D | None, L | None]]:
    """Every name in either, with what each side has (``None``: absent), sorted by name."""
    return [(name, desired.get(name), live.get(name)) for name in sorted(set(desired) | set(live))]


def compare(
    desired: dict[str, Any], live: dict[str, Any], last: dict[str, Any] | None
) -> tuple[dict[str, Any], list[FieldChange]]:
    """``(live seen through the managed fields, the field changes)``; see the module docstring."""
    # the common case (no field differs, and the files did not change since the last apply):
    # one plain walk over the three that stops at the first difference; the full walk below
    # runs only when there is one, and gives the same answer as it would have anyway
    projected = _equal_projection(desired, live, last, last is not None)
    if projected is not _DIFFERS:
        return (projected if isinstance(projected, dict) else {}), []
    changes: list[FieldChange] = []
    before = _walk(
        FieldPath.root(), desired, live, ABSENT if last is None else last, last is not None, changes
    )
    changes.sort(key=lambda f: f.path)
    return (before if isinstance(before, dict) else {}), changes


_DIFFERS: Any = object()


def _equal_projection(d: Any, v: Any, last: Any, has_last: bool) -> Any:
    """What ``_walk`` returns when no field differs and ``last`` is ``d`` (or absent); else ``_DIFFERS``."""
    if isinstance(d, dict):
        if not isinstance(v, dict) or (has_last and (not isinstance(last, dict) or last.keys() != d.keys())):
            return _DIFFERS
        out = {}
        for k in sorted(d):
            if k not in v:
                return _DIFFERS
            sub = _equal_projection(d[k], v[k], last[k] if has_last else None, has_last)
            if sub is _DIFFERS:
                return _DIFFERS
            out[k] = sub
        return out
    if isinstance(d, list) and isinstance(v, list) and len(d) == len(v):
        if has_last and (not isinstance(last, list) or len(last) != len(d)):
            return _DIFFERS
        items = []
        for i, (dv, vv) in enumerate(zip(d, v, strict=True)):
            sub = _equal_projection(dv, vv, last[i] if has_last else None, has_last)
            if sub is _DIFFERS:
                return _DIFFERS
            items.append(sub)
        return items
    if has_last and not _same_leaf(d, last):
        return _DIFFERS
    return v if _same_leaf(d, v) else _DIFFERS


def _same_leaf(a: Any, b: Any) -> bool:
    if a.__class__ is b.__class__ and a.__class__ in (str, int, bool) and a == b:
        return True  # what ``same`` says here, without its checks
    return same(a, b)


def _walk(path: FieldPath, d: Any, v: Any, last: Any, has_last: bool, out: list[FieldChange]) -> Any:
    """Compare at ``path``; returns the projection of ``v`` onto the managed fields."""
    if isinstance(d, dict) or isinstance(last, dict):
        keys = set(d) if isinstance(d, dict) else set()
        if isinstance(last, dict):
            keys |= set(last)
        live = v if isinstance(v, dict) else {}
        if not isinstance(v, dict) and v is not ABSENT and not isinstance(d, dict):
            return _leaf(path, d, v, last, has_last, out)
        projected: dict[str, Any] = {}
        for k in sorted(keys):
            dk = d.get(k, ABSENT) if isinstance(d, dict) else ABSENT
            lk = last.get(k, ABSENT) if isinstance(last, dict) else ABSENT
            sub = _walk(path.key(k), dk, live.get(k, ABSENT), lk, has_last, out)
            if sub is not ABSENT:
                projected[k] = sub
        if v is ABSENT and not projected:
            return ABSENT
        if not isinstance(v, dict):
            return v
        return projected
    if isinstance(d, list) and isinstance(v, list) and len(d) == len(v):
        items = []
        for i, (dv, vv) in enumerate(zip(d, v, strict=True)):
            lv = last[i] if isinstance(last, list) and i < len(last) else ABSENT
            items.append(_walk(path.index(i), dv, vv, lv, has_last, out))
        return items
    return _leaf(path, d, v, last, has_last, out)


def _leaf(path: FieldPath, d: Any, v: Any, last: Any, has_last: bool, out: list[FieldChange]) -> Any:
    if not same(d, v) and not (d is ABSENT and v is ABSENT):
        drift = has_last and same(d, last) and not same(v, last)
        out.append(FieldChange(str(path), v, d, forces_replace(path.steps), drift))
    return v
