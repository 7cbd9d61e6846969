"""Merging a rendered template's spec under a run spec: the run spec wins.

Maps merge deeply, lists and scalars replace, and an explicit ``null`` in the run spec removes
the field: "not given" (a key that is absent, ``UNSET`` below) and "given as null" differ, and
only the second removes. (A value that renders to ``null`` in the template was left out by the
rendering already.)

Owns: ``merge``. Must not touch: anything else; it is pure and changes neither argument.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["UNSET", "merge"]


class _Unset:
    """The type of ``UNSET``: a field not given, as opposed to one given as ``null``."""

    def __repr__(self) -> str:
        return "UNSET"


#: A field that is not there (not the same as ``None``, which removes it).
UNSET: Final[Any] = _Unset()


def merge(base: Any, over: Any) -> Any:
    """``over`` on top of ``base``: maps merge deeply, lists and scalars replace, null removes.

    Pure; neither argument is changed. ``merge(a, {}) == a``, and merging the same ``over``
    twice changes nothing: ``merge(merge(a, b), b) == merge(a, b)``.
    """
    if not isinstance(over, dict):
        return over
    out = dict(base) if isinstance(base, dict) else {}
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge(out.get(k, UNSET), v)
    return out
