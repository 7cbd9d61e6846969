"""The one question every write verb asks before it acts (``astra apply``, ``astra delete``,
``astra rerun``): only ``yes`` goes on, as Terraform asks; with no terminal to ask on, it refuses
and says to give ``--yes``.

Must not touch: what the verb does (the caller's).
"""

from __future__ import annotations

import sys

from .output import echo, error

__all__ = ["confirmed"]


def confirmed(question: str, *, no_terminal: str, declined: str) -> bool:
    """Whether the user types 'yes' to ``question``; else ``no_terminal`` (stdin is no terminal)
    or ``declined`` (any other answer) is said as the error, and ``False``."""
    if not sys.stdin.isatty():
        error(no_terminal)
        return False
    echo(f"{question} Only 'yes' goes on.")
    try:
        answer = input("Enter a value: ").strip().lower()
    except EOFError:
        answer = ""
    if answer != "yes":
        error(declined)
        return False
    return True
