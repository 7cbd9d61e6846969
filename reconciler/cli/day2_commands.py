"""Registers the day-2 commands (``get``, ``describe``, ``logs``, ``delete``, ``rerun``,
``schedule``) on the
``astra`` application: one call from ``app``, so that their modules stay apart from it.

Must not touch: the commands themselves.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(app: Any) -> None:
    from .get import get_app

    # one `astra get`: its runs and workers join a group registered already (`get workspaces`)
    same = next((g.typer_instance for g in app.registered_groups if g.name == "get"), None)
    if same is None:
        app.add_typer(get_app, name="get")
    else:
        same.registered_commands += get_app.registered_commands
    from .describe import describe_app

    app.add_typer(describe_app, name="describe")
    from .logs import logs

    app.command("logs")(logs)
    from .delete import delete

    app.command("delete")(delete)
    from .rerun import rerun

    app.command("rerun")(rerun)
    from .schedule import schedule_app

    app.add_typer(schedule_app, name="schedule")
