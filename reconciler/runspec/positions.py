"""A value's line and column read from a document's lines, without composing its YAML.

Every warning of a valid run is placed (``astra validate`` prints ``file:line:column``), and so is
every error; ruamel.yaml composing a small document to find one key costs about 300 µs, more
than loading and validating it. Most documents are plain block YAML (keys at the start of their
lines, ``- `` items, values on one line or a ``|`` block), whose positions the lines say at once.

``block_position(lines, steps, key)`` walks such lines as the composer's nodes would be walked
(``loading.FileText.locate``: the first key of that name, a missing step resolving to its nearest
existing parent) and gives the 0-based line and column, or ``None`` for anything it does not
read exactly: tabs, anchors, aliases, tags, quoted or flow values that go on to another line,
complex or quoted keys, a step into a flow collection, a plain value on several lines, a null's
own position. Then the composer answers, as before; ``tests/hostile/test_positions.py`` holds
both to the same answers. Pure: lines in, a position out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["ODD", "block_position"]

#: Text the walk leaves to the composer: tabs, carriage returns, and the characters Python ends a
#: line at but YAML does not (the document's lines would not be YAML's).
ODD = re.compile("[\t\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029\ufeff]")
_KEY = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_./-]*):(?: |$)")
#: what makes a one-line flow collection need the careful reading
_FLOW_BUSY = re.compile(r"[][{}'\"#]")
_BLOCK_HEADER = re.compile(r"[|>][0-9+-]{0,2} *(?:#.*)?$")

# a token: (line, column, kind, key, value kind, value column); kind "k" (a key) or "-" (an item);
# value kind None (on the lines below, or null), "map" (an item's compact mapping), "scalar",
# "flow", "block" (a | or > scalar)
_Token = tuple[int, int, str, str | None, str | None, int]


class _Unsure(Exception):
    """Something the walk does not read exactly: the composer answers."""


def block_position(lines: Sequence[str], steps: Sequence[str | int], key: bool) -> tuple[int, int] | None:
    """0-based line and column of the value at ``steps`` (its key with ``key``), as
    ``FileText.locate`` finds it in the composed ``lines``; ``None`` when unsure."""
    try:
        tokens = _tokens(lines)
        if not tokens:
            return None
        node: tuple = ("range", 0, len(tokens))
        key_token: _Token | None = None
        for step in steps:
            child = _child(tokens, node, step)
            if child is None:
                break
            key_token, node = child
        else:
            if key and key_token is not None:
                return key_token[0], key_token[1]
            return _start(tokens, node)
        return (key_token[0], key_token[1]) if key_token is not None else _start(tokens, node)
    except _Unsure:
        return None


def _start(tokens: list[_Token], node: tuple) -> tuple[int, int]:
    if node[0] == "range":
        first = tokens[node[1]]
        return first[0], first[1]
    if node[0] in ("leaf", "flow"):
        return node[1], node[2]
    raise _Unsure  # a null: where the composer puts it is its own affair


def _child(tokens: list[_Token], node: tuple, step: str | int) -> tuple[_Token | None, tuple] | None:
    """The key and value nodes of ``step`` in ``node``, as ``loading._child`` gives them."""
    if node[0] == "flow":
        raise _Unsure
    if node[0] != "range":
        return None  # a scalar or a null has no children
    _, a, b = node
    column, kind = tokens[a][1], tokens[a][2]
    members = []
    for j in range(a, b):
        t = tokens[j]
        if t[1] < column:
            raise _Unsure
        if t[1] == column:
            if t[2] == kind:
                members.append(j)
            elif kind == "k" and t[2] == "-" and tokens[members[-1]][4] is None:
                continue  # an item of the sequence the key before holds, at the key's column
            else:
                raise _Unsure
    if (kind == "k") != isinstance(step, str):
        return None
    if kind == "k":
        found = next((n for n, j in enumerate(members) if tokens[j][3] == step), None)
    else:
        found = step if isinstance(step, int) and 0 <= step < len(members) else None
    if found is None:
        return None
    j = members[found]
    end = members[found + 1] if found + 1 < len(members) else b
    t = tokens[j]
    value_kind = t[4]
    if value_kind is None or value_kind == "map":
        value: tuple = ("range", j + 1, end) if j + 1 < end else ("null",)
    elif j + 1 < end:
        raise _Unsure  # a value on its line and more below it: not read here
    else:
        value = ("flow" if value_kind == "flow" else "leaf", t[0], t[5])
    return (t if kind == "k" else None), value


def _tokens(lines: Sequence[str]) -> list[_Token]:
    out: list[_Token] = []
    block: tuple[int, int | None] | None = None  # a block scalar's parent column, content indent
    ended = False
    for n, line in enumerate(lines):
        stripped = line.lstrip(" ")
        if not stripped:
            continue
        indent = len(line) - len(stripped)
        if block is not None:
            parent, content = block
            if indent > parent:
                if content is None:
                    block = (parent, indent)
                elif indent < content:
                    raise _Unsure
                continue
            block = None
        if stripped[0] == "#":
            continue
        if ended:
            raise _Unsure
        if indent == 0 and line[:3] in ("---", "...") and (len(line) == 3 or line[3] == " "):
            rest = line[3:].strip()
            if out or (rest and rest[0] != "#"):
                raise _Unsure
            ended = line[0] == "."
            continue
        parent_column = _line(n, indent, stripped, out)
        if parent_column is not None:
            block = (parent_column, None)
    return out


def _line(n: int, column: int, text: str, out: list[_Token]) -> int | None:
    """The tokens of one line; the column a block scalar's content must be deeper than."""
    if text[0] == "-" and (len(text) == 1 or text[1] == " "):
        rest = text[1:].lstrip(" ")
        at = column + len(text) - len(rest)
        if not rest or rest[0] == "#":
            out.append((n, column, "-", None, None, at))
            return None
        if _KEY.match(rest) is None:
            kind = _value(rest)
            out.append((n, column, "-", None, kind, at))
            return column if kind == "block" else None
        out.append((n, column, "-", None, "map", at))
        column, text = at, rest
    m = _KEY.match(text)
    if m is None:
        raise _Unsure
    rest = text[m.end() :].lstrip(" ")
    at = column + len(text) - len(rest)
    if not rest or rest[0] == "#":
        out.append((n, column, "k", m.group(1), None, at))
        return None
    kind = _value(rest)
    out.append((n, column, "k", m.group(1), kind, at))
    return column if kind == "block" else None


def _value(text: str) -> str:
    """The kind of a value that starts a line's rest, if it ends on this line."""
    c = text[0]
    if c == '"' or c == "'":
        _after(text, _quoted_end(text, 0))
        return "scalar"
    if c == "[" or c == "{":
        _after(text, _flow_end(text))
        return "flow"
    if c == "|" or c == ">":
        if _BLOCK_HEADER.match(text) is None:
            raise _Unsure
        return "block"
    if c in "&*!%@`,]}" or (c in "-?:" and (len(text) == 1 or text[1] == " ")):
        raise _Unsure
    if ": " in text or text.endswith(":"):  # in a comment, or a value YAML refuses
        plain = text.split(" #", 1)[0].rstrip(" ")
        if ": " in plain or plain.endswith(":"):
            raise _Unsure
    return "scalar"


def _after(text: str, end: int) -> None:
    """Only a comment may follow a value that ends at ``end``."""
    rest = text[end:]
    tail = rest.lstrip(" ")
    if tail and (tail[0] != "#" or len(tail) == len(rest)):
        raise _Unsure


def _quoted_end(text: str, start: int) -> int:
    quote = text[start]
    i = start + 1
    while i < len(text):
        c = text[i]
        if quote == '"' and c == "\\":
            i += 2
            continue
        if c == quote:
            if quote == "'" and text[i + 1 : i + 2] == "'":
                i += 2
                continue
            return i + 1
        i += 1
    raise _Unsure  # it goes on to the next line


def _flow_end(text: str) -> int:
    if text.endswith("]" if text[0] == "[" else "}") and not _FLOW_BUSY.search(text, 1, len(text) - 1):
        return len(text)  # one flat collection, the line's end its end: {size: 2}
    depth = 0
    i = 0
    before = ""  # the last character that was not a space
    while i < len(text):
        c = text[i]
        if c == '"' or c == "'":
            if not (before in ("[", "{", ",") or (before == ":" and text[i - 1] == " ")):
                raise _Unsure  # a quote inside a plain scalar, or a value stuck to its key
            i = _quoted_end(text, i)
            before = c
            continue
        if c == "#" and text[i - 1] == " ":
            raise _Unsure  # a comment: the collection goes on below
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
            if depth == 0:
                return i + 1
        if c != " ":
            before = c
        i += 1
    raise _Unsure
