"""JSON text as ``json.dumps(value, separators=(",", ":"))`` reads back: written by orjson.

``compact(value)`` is what a batch's body carries and what the control plane stores of a run's
document, its inventory entry's spec and an audit event's detail: orjson writes it many times
faster than ``json.dumps``. Its text may differ (non-ASCII characters as UTF-8 rather than
``\\u`` escapes, a float's shortest form ``0.00001`` rather than ``1e-05``), but ``json.loads``
reads back the same value, which is all its readers do. Where orjson would write another value,
``json.dumps`` writes it: NaN and the infinities (orjson writes ``null``; seen as a ``null`` in
the text), an integer past 64 bits, a key that is not a string, a lone surrogate (orjson
refuses them), or anything but plain JSON values (a subclass, a date: passed through to be
refused).

Must not touch: HTTP, the store. Pure.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["PLAIN", "compact"]

#: orjson writes plain JSON values only: a date, a dataclass, a subclass are passed through (refused)
PLAIN = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS


def compact(value: Any, *, sort_keys: bool = False) -> bytes:
    """``value`` as compact JSON text (UTF-8), keys sorted with ``sort_keys`` (see the docstring)."""
    try:
        text = orjson.dumps(value, option=PLAIN | (orjson.OPT_SORT_KEYS if sort_keys else 0))
    except TypeError:  # orjson.JSONEncodeError is one
        text = b"null"
    if b"null" in text:
        return json.dumps(value, separators=(",", ":"), sort_keys=sort_keys).encode()
    return text
