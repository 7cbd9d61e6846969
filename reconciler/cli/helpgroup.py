"""``astra --help``'s list of commands (and each group's, ``astra source --help``), each with the
first sentence of its help whole.

click cuts each command's line to fit one row (``Check run specs against the published
schema and rules,...``), whatever the terminal's width; a newcomer reads that list first. Here
each command says its first sentence (up to the first ``. ``, or its first paragraph), wrapped
under its name as click wraps a definition list, never cut.

Must not touch: the commands themselves, their own ``--help`` (typer's).
"""

from __future__ import annotations

import re
from typing import Any

from typer.core import TyperGroup

__all__ = ["WholeFirstSentence", "first_sentence"]

_END = re.compile(r"(?<=[.!?])\s")


def first_sentence(text: str | None) -> str:
    """The first sentence of ``text``'s first paragraph, whole (without its final period)."""
    if not text:
        return ""
    paragraph = " ".join(text.strip().split("\n\n", 1)[0].split())
    sentence = _END.split(paragraph, maxsplit=1)[0]
    return sentence[:-1] if sentence.endswith(".") else sentence


class WholeFirstSentence(TyperGroup):
    """A typer group whose command list says each command's first sentence whole."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is None or cmd.hidden:
                continue
            rows.append((name, cmd.short_help or first_sentence(cmd.help)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
