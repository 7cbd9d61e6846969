"""The ``astra`` command line: thin typer commands over the package's layers.

Commands import what they need when they run, so each pays only for its own imports. No
traceback reaches a user: ``main`` turns every error into one line and exit code 1 (usage
errors too, so that ``--detailed-exitcode``'s 2 always means "changes").
"""

from __future__ import annotations

import sys

__all__ = ["app", "main"]


def main(argv: list[str] | None = None) -> int:
    from .app import run

    code = run(sys.argv[1:] if argv is None else argv)
    raise SystemExit(code)


def __getattr__(name: str):
    if name == "app":
        from .app import app

        return app
    raise AttributeError(name)
