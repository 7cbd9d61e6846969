"""Limits on what one document may hold, so that no file or request can stall or poison astra.

Owns: the checks a JSON Schema cannot make on every value of a document whatever its field:
text is valid Unicode without NUL characters (keys too), integers fit in 64 bits, numbers are
finite (NaN and Infinity are named as such, not as ``null``), nesting is at most ``DEPTH_MAX``
levels, and the whole document is at most ``DOCUMENT_MAX_BYTES`` as JSON. The per-field limits
(string lengths, workers per run) are in the models and the rules, where the published schema
carries them to the editor.

``check_limits(doc)`` is part of ``validate_data``, so the CLI, the API's 422 and plan all
enforce it. Its fast path is one ``orjson.dumps`` (it refuses lone surrogates, integers beyond
64 bits and runaway nesting by itself) and a few byte scans of the result; only a document
that trips one of them is walked, iteratively, to name each offending path.

Must not touch: files, I/O, pydantic. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import orjson

from . import messages as msg
from .errors import FieldError
from .paths import FieldPath

__all__ = ["check_limits", "doc_depth_ok", "printable_path"]


def check_limits(doc: Any) -> list[FieldError]:
    """Every value of ``doc`` that breaks a limit of this module, each with its path."""
    try:
        data = orjson.dumps(doc)
    except (TypeError, orjson.JSONEncodeError):  # a surrogate, a 65-bit int, deep nesting, a bad key
        return list(_walk(doc))
    if (
        len(data) > msg.DOCUMENT_MAX_BYTES
        or b"\\u0000" in data
        or b"null" in data  # orjson writes NaN and Infinity as null
        or data.count(b"{") + data.count(b"[") > msg.DEPTH_MAX  # a bound on the depth
    ):
        return list(_walk(doc, len(data)))
    return []


def doc_depth_ok(doc: Any) -> bool:
    """Whether ``doc`` nests at most ``DEPTH_MAX`` levels (checked without recursion)."""
    stack = [(doc, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth >= msg.DEPTH_MAX:
                return False
            items = value.values() if isinstance(value, dict) else value
            stack.extend((v, depth + 1) for v in items)
    return True


def _walk(doc: Any, size: int | None = None) -> Iterator[FieldError]:
    root = FieldPath.root()
    stack: list[tuple[Any, FieldPath, int]] = [(doc, root, 0)]
    broken = False
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, dict):
            if depth >= msg.DEPTH_MAX:
                broken = True
                yield FieldError.invalid(path, msg.TOO_DEEP)
                continue
            for key, item in reversed(value.items()):
                if isinstance(key, str) and not _text_ok(key):
                    broken = True
                    yield FieldError.invalid(path.key(_shown(key)), msg.TEXT)
                    continue
                where = path.key(key) if isinstance(key, str) else path.key(str(key))
                stack.append((item, where, depth + 1))
        elif isinstance(value, list):
            if depth >= msg.DEPTH_MAX:
                broken = True
                yield FieldError.invalid(path, msg.TOO_DEEP)
                continue
            stack.extend((item, path.index(i), depth + 1) for i, item in reversed(list(enumerate(value))))
        elif isinstance(value, str):
            if not _text_ok(value):
                broken = True
                yield FieldError.invalid(path, msg.TEXT)
        elif isinstance(value, bool):
            continue
        elif isinstance(value, int):
            if not msg.INT_MIN <= value <= msg.INT_MAX:
                broken = True
                yield FieldError.invalid(path, msg.INTEGER_RANGE)
        elif isinstance(value, float) and not math.isfinite(value):
            broken = True
            words = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
            yield FieldError.invalid(path, msg.NOT_FINITE.format(value=words))
    if not broken:
        if size is None:
            try:
                size = len(orjson.dumps(doc))
            except TypeError:  # a key that is not a string: the schema's check names it
                return
        if size > msg.DOCUMENT_MAX_BYTES:
            yield FieldError.invalid(root, msg.DOCUMENT_TOO_LARGE.format(size=size))


def _text_ok(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: not Unicode text
        return False
    return True


def printable_path(path: FieldPath) -> FieldPath:
    """``path`` with each key that is not valid text made printable, as ``check_limits`` names it."""
    if all(isinstance(s, int) or _text_ok(s) for s in path.steps):
        return path
    return FieldPath(tuple(s if isinstance(s, int) or _text_ok(s) else _shown(s) for s in path.steps))


def _shown(key: str) -> str:
    """A key that is not valid text, made printable for its path (``\\x00``, ``\\udc00``)."""
    return key.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")
