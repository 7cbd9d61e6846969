"""The one reader of a request's body: bounded, strict JSON, refused in the API's words.

Owns: ``strict_json`` (bytes → a JSON value, or ``BodyRefused``), ``StrictRequest`` (a request
whose ``body()`` is bounded and whose ``json()`` is ``strict_json``: FastAPI reads every
pydantic-typed body through it; ``context.read_json`` reads a run document with it), and the
limits of a body. Python's ``json.loads`` alone recursed (10,000 levels: ``RecursionError``),
kept the last of two equal keys, read ``NaN`` and built integers of any length, and each of those
reached a 500 or the store; here each is refused, with its path where it has one:

=============================================  ======  =========================================
what                                           status  answer
=============================================  ======  =========================================
a body over ``BODY_MAX_BYTES`` (16 MiB)        413     ``Detail``: its size and the limit
bytes that are not UTF-8, or not JSON          422     ``the body is not JSON: …`` (path ``''``)
nesting deeper than ``BODY_DEPTH_MAX`` (64)    422     ``the body nests more than 64 levels deep…``
a key given twice in one object                422     at the key's path: ``duplicate key 'K'…``
=============================================  ======  =========================================

The value is read by orjson when it reads it as ``json.loads`` with these checks would
(``_read_plainly`` says when: no key twice, no integer past 64 bits), three times faster: a
batch of 1,000 runs is a body of about 1 MB; its nesting is then counted on the value read
(``_nesting``). Else the bytes' nesting is counted first (``_depth``: ``json.loads`` recurses),
and ``json.loads`` reads them, which says what is wrong.

An integer is read exactly up to ``INT_DIGITS_MAX`` digits (Python's own default bound for reading
one: past it, ``int`` refuses in words about ``sys.set_int_max_str_digits``); a longer one is
refused at its path, with no integer built.

A run document's values are ``validate_data``'s to check (with every other problem at once):
``strict_json(raw, values=False)``. Every other body (``values=True``) is held here to the spec
layer's rules for text and numbers, in its words (``runspec.messages``): text is valid Unicode
without NUL characters (keys too), numbers are finite (``NaN`` and ``Infinity`` named as such).
What the store keeps and every answer renders is then JSON. (An integer past 64 bits is no harm
in a source's free-form bookkeeping, which is kept as JSON text; a field the store compares, as
a ``resource_version``, is bounded by its ``wire`` model.)

Must not touch: routes, the engine, the token (``context.ApiRoute`` checks it before any byte
of a body is read).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Iterator
from itertools import accumulate
from typing import Any

import orjson
from fastapi import HTTPException
from pydantic import BaseModel
from starlette.requests import Request

from ...runspec import messages as msg
from ...runspec.limits import printable_path
from ...runspec.paths import FieldPath
from ...wire import models as wire

__all__ = [
    "BODY_DEPTH_MAX",
    "BODY_MAX_BYTES",
    "INT_DIGITS_MAX",
    "OFF_LOOP_BYTES",
    "BodyRefused",
    "StrictRequest",
    "read_body",
    "strict_json",
    "strict_json_off_loop",
]

#: The most bytes a request's body may hold: a run document is at most 1 MiB as compact JSON
#: (``runspec.messages.DOCUMENT_MAX_BYTES``); indented, or as a source's inventory entry, it fits.
BODY_MAX_BYTES = 16 * 1024 * 1024
#: The deepest a body may nest: a run document at its deepest (``DEPTH_MAX``, 32) inside a
#: source's inventory fits, and ``json.loads`` stays far from Python's recursion limit.
BODY_DEPTH_MAX = 64
#: A body at least this large is parsed in a worker thread, off the event loop.
OFF_LOOP_BYTES = 256 * 1024

TOO_LARGE = "the body is {size} bytes; a request's body may be at most {limit} bytes (16 MiB)"
TOO_DEEP = f"the body nests more than {BODY_DEPTH_MAX} levels deep: no request of this API needs that many"
DUPLICATE = "duplicate key '{key}': a key may appear once in an object"

#: A JSON string (its escapes included), to skip when counting brackets.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
#: Each digit made ``0`` and every other byte a space: 19 digits in a row are found by ``in``.
_DIGITS = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
#: ``_read_plainly``'s answer when orjson's reading may not be ``json.loads``'s.
_UNSURE = object()
#: The most digits an integer of a body may have (Python's default bound for ``int(text)``).
INT_DIGITS_MAX = 4300
HUGE = f"is a whole number of {{digits}} digits; a request's numbers have at most {INT_DIGITS_MAX}"


class BodyRefused(HTTPException):
    """A body refused before any route saw it: its status and its ``wire`` answer. An
    ``HTTPException``, so that FastAPI's body reading lets it through as it is."""

    def __init__(self, status: int, body: BaseModel) -> None:
        super().__init__(status)
        self.body = body


def _refused(path: FieldPath, message: str) -> BodyRefused:
    return BodyRefused(422, wire.Problems([wire.Problem(path=str(path), message=message)]))


class _Twice(dict[str, Any]):
    """An object of the body in which a key was given twice (the first such key)."""

    twice: str


class _Huge:
    """An integer of more than ``INT_DIGITS_MAX`` digits, in its place (refused at its path)."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


class _Reading:
    """One body's reading: ``json.loads`` with hooks that note what needs a walk afterwards."""

    def __init__(self) -> None:
        self.flagged = False  # a key twice in one object, an integer too long to read

    def object(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) == len(pairs):
            return obj
        self.flagged = True
        twice = _Twice(obj)
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                twice.twice = key
                break
            seen.add(key)
        return twice

    def integer(self, text: str) -> int | _Huge:
        digits = len(text) - text.startswith("-")
        if digits <= INT_DIGITS_MAX:
            return int(text)
        self.flagged = True
        return _Huge(digits)


def strict_json(raw: bytes, *, values: bool = True) -> Any:
    """The JSON value of a body; ``BodyRefused`` (422, ``wire.Problems``) for bytes that are not
    UTF-8 or not JSON, nesting past ``BODY_DEPTH_MAX``, a key twice in one object, and, with
    ``values``, any value past the spec layer's limits (each named at its path)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refused(
            FieldPath.root(), f"the body is not JSON: it is not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    reading = _Reading()
    value = _read_plainly(raw)  # orjson reads no more than 1,024 levels: past them, it is _UNSURE
    if value is _UNSURE:
        if _depth(raw) > BODY_DEPTH_MAX:
            raise _refused(FieldPath.root(), TOO_DEEP)
        value = _read(text, reading)
    elif _nesting(value) > BODY_DEPTH_MAX:
        raise _refused(FieldPath.root(), TOO_DEEP)
    if reading.flagged or values:
        found = list(_problems(value, values=values))
        if found:
            raise BodyRefused(422, wire.Problems(found))
    return value


def _read_plainly(raw: bytes) -> Any:
    """``raw``'s value read by orjson (three times faster than ``json.loads`` with ``_Reading``'s
    hooks), when it is sure to be the value ``_read`` would give; else ``_UNSURE``. orjson differs
    from ``json.loads`` in what it does with a key twice (it keeps one, silently), with an integer
    past 64 bits (a float) and with what it refuses (``NaN``, a number past a double, bad JSON:
    ``json.loads`` reads the first two and says why in its own words of the third). So it is not
    asked when a run of 19 digits may be such an integer, and what it refuses is read by ``_read``.
    A key given twice is seen in the count of colons: without an escape ``\\u`` (which could write
    one), every colon of the body is a key's or a character of a string, and orjson writes each
    again as it is, so its writing of the value has fewer only when a key was dropped."""
    # one byte is searched forty times faster than two: a body with no backslash is known at once
    if (b"\\" in raw and b"\\u" in raw) or b"0" * 19 in raw.translate(_DIGITS):
        return _UNSURE
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _UNSURE
    if orjson.dumps(value).count(b":") != raw.count(b":"):
        return _UNSURE
    return value


def _read(text: str, reading: _Reading) -> Any:
    """``text``'s value by ``json.loads``, with ``reading``'s hooks; ``BodyRefused`` when it is no JSON."""
    try:
        return json.loads(text, object_pairs_hook=reading.object, parse_int=reading.integer)
    except json.JSONDecodeError as exc:
        raise _refused(FieldPath.root(), f"the body is not JSON: {exc}") from None
    except RecursionError:  # _depth's count is the bound; this is its guard
        raise _refused(FieldPath.root(), TOO_DEEP) from None


async def strict_json_off_loop(raw: bytes, *, values: bool = True) -> Any:
    """``strict_json``, in a worker thread when the body is large (the event loop keeps answering)."""
    if len(raw) < OFF_LOOP_BYTES:
        return strict_json(raw, values=values)
    return await asyncio.to_thread(strict_json, raw, values=values)


def _depth(raw: bytes) -> int:
    """How deep ``raw`` nests (its brackets outside strings); a bound when it has few brackets.

    A count of opening brackets bounds the depth, so a small body is never scanned. The scan
    reads strings as JSON does; where the two would disagree (a string left open), ``json.loads``
    refuses the body at that point, before it nests any deeper."""
    opening = raw.count(b"[") + raw.count(b"{")
    if opening <= BODY_DEPTH_MAX:
        return opening
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(accumulate(1 if b in b"[{" else -1 for b in brackets), default=0)


def _nesting(value: Any) -> int:
    """How deep ``value`` nests (``_depth`` of the bytes it was read from), counted level by
    level up to one past ``BODY_DEPTH_MAX``: five times faster than ``_depth`` scans its bytes."""
    depth = 0
    level = [value] if type(value) is dict or type(value) is list else []
    while level and depth <= BODY_DEPTH_MAX:
        depth += 1
        inner = []
        for v in level:
            for x in v.values() if type(v) is dict else v:
                if type(x) is dict or type(x) is list:
                    inner.append(x)
        level = inner
    return depth


def _problems(doc: Any, *, values: bool) -> Iterator[wire.Problem]:
    """Each key given twice, each integer too long to read and, with ``values``, each text or
    number the spec layer's rules refuse, with its path."""
    stack: list[tuple[Any, FieldPath]] = [(doc, FieldPath.root())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            if isinstance(value, _Twice):
                where = printable_path(path.key(value.twice))
                yield wire.Problem(path=str(where), message=DUPLICATE.format(key=where.last))
            for key, item in reversed(value.items()):
                if values and not _text_ok(key):
                    yield wire.Problem(path=str(printable_path(path.key(key))), message=msg.TEXT)
                else:
                    stack.append((item, path.key(key)))
        elif isinstance(value, list):
            stack.extend((item, path.index(i)) for i, item in reversed(list(enumerate(value))))
        elif isinstance(value, _Huge):
            yield wire.Problem(path=str(printable_path(path)), message=HUGE.format(digits=value.digits))
        elif not values:
            continue
        elif isinstance(value, str):
            if not _text_ok(value):
                yield wire.Problem(path=str(printable_path(path)), message=msg.TEXT)
        elif isinstance(value, float) and not math.isfinite(value):
            words = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
            yield wire.Problem(path=str(printable_path(path)), message=msg.NOT_FINITE.format(value=words))


def _text_ok(text: str) -> bool:
    """Valid Unicode (no lone surrogate: one cannot be written as UTF-8) without NUL characters."""
    if "\x00" in text:
        return False
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


async def read_body(request: Request) -> bytes:
    """The request's body, refused (413) as soon as it is larger than ``BODY_MAX_BYTES``: a
    declared ``Content-Length`` before a byte is read, else while it streams."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and (len(declared) > 9 or int(declared) > BODY_MAX_BYTES):
        raise _too_large(int(declared) if len(declared) <= 9 else None)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > BODY_MAX_BYTES:
            raise _too_large(None)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(size: int | None) -> BodyRefused:
    said = f"more than {BODY_MAX_BYTES}" if size is None else str(size)
    return BodyRefused(413, wire.Detail(detail=TOO_LARGE.format(size=said, limit=BODY_MAX_BYTES)))


class StrictRequest(Request):
    """A request whose body is read by ``read_body`` (bounded) and whose ``json()`` is
    ``strict_json``: what FastAPI parses a pydantic-typed body with (``context.ApiRoute``)."""

    async def body(self) -> bytes:
        if not hasattr(self, "_body"):
            self._body = await read_body(self)
        return self._body

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = await strict_json_off_loop(await self.body())
        return self._json
