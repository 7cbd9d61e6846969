"""Registers the day-2 commands (``get``, ``describe``, ``logs``, ``delete``, ``rerun``) on the
``astra`` application: one call from ``app``, so that their modules stay apart from it.

Must not touch: the commands themselves.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(app: Any) -> None:
    from .get import get_app

    app.add_typer(get_app, name="get")
    from .describe import describe_app

    app.add_typer(describe_app, name="describe")
    from .logs import logs

    app.command("logs")(logs)
    from .delete import delete

    app.command("delete")(delete)
    from .rerun import rerun

    app.command("rerun")(rerun)
