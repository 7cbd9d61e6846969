"""Colour for a person at a terminal: plan symbols, validation problems, run states.

On only when the stream is a terminal, ``NO_COLOR`` is unset (https://no-color.org) and ``TERM``
is not ``dumb``; piped or redirected output stays plain text (scripts and snapshots read it).
ANSI codes by hand: this module imports nothing, for ``astra validate``'s fast path.

Must not touch: the words (the renderers'): colour wraps lines, never changes them.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

__all__ = ["enabled", "paint", "paint_plan", "paint_problem", "paint_state"]

_CODES = {"green": "32", "yellow": "33", "red": "31", "magenta": "35", "bold": "1", "dim": "2", "cyan": "36"}

#: A plan line's symbol (``reconciler.plan.SYMBOLS``) and its colour, longest first.
_PLAN = (("-/+ ", "magenta"), ("+ ", "green"), ("~ ", "yellow"), ("- ", "red"), ("= ", "dim"))
#: Run and worker states, and their colours.
_STATES = {
    "Running": "green",
    "Ready": "green",
    "Completed": "cyan",
    "Failed": "red",
    "Stalled": "red",
    "Down": "red",
    "Cancelled": "yellow",
    "Stopped": "yellow",
    "Pending": "yellow",
    "Reconciling": "yellow",
}


def enabled(stream: TextIO | None = None) -> bool:
    stream = sys.stdout if stream is None else stream
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def paint(text: str, colour: str, on: bool) -> str:
    return f"\033[{_CODES[colour]}m{text}\033[0m" if on and text else text


def paint_plan(text: str, on: bool) -> str:
    """A rendered plan with each change's line coloured by its symbol, the summary in bold."""
    if not on:
        return text
    out = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\n")
        colour = next((c for symbol, c in _PLAN if body.startswith(symbol)), None)
        if colour is None and body.startswith("Plan: "):
            colour = "bold"
        out.append(paint(body, colour, True) + line[len(body) :] if colour else line)
    return "".join(out)


def paint_problem(line: str, on: bool, *, warning: bool = False) -> str:
    """``FILE:LINE:COLUMN: PATH: MESSAGE`` with its place in bold and its message red (yellow:
    a warning)."""
    if not on:
        return line
    where, sep, rest = line.partition(": ")
    return paint(where, "bold", True) + sep + paint(rest, "yellow" if warning else "red", True)


def paint_state(state: str, width: int, on: bool) -> str:
    """A state cell padded to ``width`` (colour codes take no room on the screen)."""
    colour = _STATES.get(state)
    return paint(state, colour, on) + " " * (width - len(state)) if colour else state.ljust(width)
