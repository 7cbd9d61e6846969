"""How deep a YAML text may nest, known before yaml-rs reads it: ``refused(text, name)``.

yaml-rs recurses once a level on the stack, and in block context it has no limit of its own:
about 12,000 levels (24 kB of ``- - - …``; a 10 MB file holds that 400 times) overflow an 8 MiB
stack and end the process with a segfault: no error, no words, and a watch loop gone. Flow
collections it refuses itself past ``FLOW`` levels, and alias replays past 64 nested replays (a
test holds both). So a text yaml-rs reads must not nest more than ``MOST`` levels, a third of
what crashes it; ``limits`` then refuses anything past ``DEPTH_MAX`` (32) in its own words.

``refused`` answers ``None`` (yaml-rs may read the text) from a bound on the text alone when it
can, in a few C-speed string operations:

* block collections nest at most ``2 × (longest line + 1)`` levels: each level starts at a
  column at least as far right as its parent's, and two levels start at the same column only
  as a mapping's value that is a sequence (``key:`` then ``- …``), whose entries' own content
  starts further right again;
* flow collections add at most ``FLOW``;
* aliases could replay deep nodes into deep nodes: a text with both an anchor and an alias gets
  no bound from its lines. Both stand where a node starts (``_ANCHOR``, ``_ALIAS``): a shell
  command's ``&&`` or a glob's ``*`` inside a scalar is neither.

Any other text (a line longer than about 1,870 characters, or an anchor and an alias: rare in
run specs) is read by ruamel.yaml's event parser (libyaml's, a state machine: no recursion,
about 0.1 ms for a spec file), counting levels with what each alias replays, and stopping at
the first node deeper than ``MOST``. That is refused with ``limits``' words at the node that is
``DEPTH_MAX`` levels deep, its path and its position (a text libyaml cannot read is refused with
its words: it cannot be shown to be safe).

Must not touch: files, yaml-rs. Pure.
"""

from __future__ import annotations

import re
from typing import Any

from . import messages as msg
from .errors import ErrorType, FieldError
from .paths import FieldPath

__all__ = ["FLOW", "MOST", "refused"]

#: The most levels a text yaml-rs reads may nest (it crashed past 12,000 on an 8 MiB stack).
MOST = 4_000
#: yaml-rs' own limit on the nesting of flow collections (``[``, ``{``): an error past it.
FLOW = 256
#: A text no longer than this cannot nest more than ``MOST`` levels without aliases.
_SHORT = (MOST - FLOW) // 2 - 1
#: Where a node's properties may stand: at a line's start, or after what starts a node (``-``,
#: ``?``, ``:``, ``[``, ``{``, ``,``), with blanks and a tag between. Every anchor and alias is
#: found (some text in scalars too, which only costs a parse).
_NODE_START = r"(?:^|[-?:\[{,])[ \t]*(?:![^ \t\n]*[ \t]+)?"
_ANCHOR = re.compile(_NODE_START + "&", re.M)
_ALIAS = re.compile(_NODE_START + r"\*", re.M)


def refused(text: str, name: str) -> FieldError | None:
    """``None`` when yaml-rs may read ``text`` (it nests at most ``MOST`` levels); else the
    error that refuses it, placed in ``name`` (see the module docstring)."""
    aliases = "&" in text and "*" in text and bool(_ANCHOR.search(text)) and bool(_ALIAS.search(text))
    if not aliases and (len(text) <= _SHORT or max(map(len, text.split("\n"))) <= _SHORT):
        return None
    return _scan(text, name)


def _scan(text: str, name: str) -> FieldError | None:
    """The text's events read in order: the first node past ``MOST`` levels, if any."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError
    from ruamel.yaml.events import (
        AliasEvent,
        CollectionEndEvent,
        CollectionStartEvent,
        DocumentStartEvent,
        MappingStartEvent,
        ScalarEvent,
    )

    # one list per open collection: [step from its parent, start mark, anchor, height of its
    # tallest child, whether it is a mapping, whether its next node is a key, its next step]
    stack: list[list[Any]] = []
    anchors: dict[str, int] = {}  # each anchored node's height: the levels an alias replays
    try:
        for event in YAML(typ="safe", pure=False).parse(text):
            if isinstance(event, CollectionEndEvent):
                done = stack.pop()
                height = done[3] + 1
                if done[2] is not None:
                    anchors[done[2]] = height
                if stack:
                    stack[-1][3] = max(stack[-1][3], height)
                continue
            if isinstance(event, DocumentStartEvent):
                anchors = {}  # an anchor is its document's
                continue
            if not isinstance(event, ScalarEvent | AliasEvent | CollectionStartEvent):
                continue
            step = _step(stack[-1], event) if stack else None
            if isinstance(event, CollectionStartEvent):
                is_map = isinstance(event, MappingStartEvent)
                stack.append([step, event.start_mark, event.anchor, 0, is_map, True, None if is_map else 0])
                if len(stack) > MOST:
                    return _too_deep(stack, None, None, name)
                continue
            height = anchors.get(event.anchor, 0) if isinstance(event, AliasEvent) else 0
            if isinstance(event, ScalarEvent) and event.anchor is not None:
                anchors[event.anchor] = 0
            if len(stack) + height > MOST:  # an alias replaying a node too tall here
                return _too_deep(stack, step, event.start_mark, name)
            if stack:
                stack[-1][3] = max(stack[-1][3], height)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        problem = exc.problem or exc.context or "not YAML"
        return FieldError(
            ErrorType.syntax, FieldPath.root(), f"YAML syntax error: {problem}", name, line, column
        )
    return None


def _step(parent: list[Any], event: Any) -> str | int:
    """The step from ``parent`` (an open collection) to its next node, ``event``."""
    if not parent[4]:  # a sequence: the next index
        parent[6] += 1
        return parent[6] - 1
    if parent[5]:  # a mapping's key: a scalar names the value after it; anything else is '?'
        parent[5] = False
        value = getattr(event, "value", None)
        parent[6] = value if isinstance(value, str) else "?"
        return parent[6]
    parent[5] = True
    return parent[6]


def _too_deep(stack: list[list[Any]], step: str | int | None, mark: Any, name: str) -> FieldError:
    """``limits``' words at the node ``DEPTH_MAX`` levels deep on the way to the one past
    ``MOST`` (or at the alias that replays past it, when that is nearer the root)."""
    frames = stack[1 : msg.DEPTH_MAX + 1]
    steps = [frame[0] for frame in frames]
    if len(frames) == msg.DEPTH_MAX:
        mark = frames[-1][1]
    elif step is not None:
        steps.append(step)
    path = FieldPath.root()
    for s in steps:
        path = path.index(s) if isinstance(s, int) else path.key(s)
    return FieldError(ErrorType.invalid, path, msg.TOO_DEEP, name, mark.line + 1, mark.column + 1)
