"""Registers the day-2 commands (``get``, ``describe``, ``logs``, ``delete``, ``rerun``,
``schedule``) on the ``astra`` application: one call from ``app``, so that their modules stay
apart from it. The reads typed all day (``get runs``, ``get workers``, ``describe run``,
``logs``) are typer's commands made of their options (``flags``) over their bodies, which import
no typer: the plain argv route (``cli/__init__.py``) runs the same bodies with the same options.

Must not touch: the commands themselves.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(app: Any) -> None:
    import typer

    from . import describe, flags, get, logs
    from .astraeus import workers

    get_app = typer.Typer(
        name="get", help=get.GET_HELP, no_args_is_help=True, add_completion=False, rich_markup_mode=None
    )
    runs = flags.typer_command(flags.GetRunsOptions, get.runs_command, "runs", get.runs_command.__doc__ or "")
    get_app.command("runs")(runs)
    get_app.command("workers")(workers)  # the help: its body's docstring, as astraeus workers'
    # one `astra get`: its runs and workers join a group registered already (`get workspaces`)
    same = next((g.typer_instance for g in app.registered_groups if g.name == "get"), None)
    if same is None:
        app.add_typer(get_app, name="get")
    else:
        same.registered_commands += get_app.registered_commands
    describe_app = typer.Typer(
        name="describe",
        help=describe.DESCRIBE_HELP,
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
    )
    doc = describe.run_command.__doc__ or ""
    describe_app.command("run")(
        flags.typer_command(flags.DescribeRunOptions, describe.run_command, "run", doc)
    )
    app.add_typer(describe_app, name="describe")
    doc = logs.logs_command.__doc__ or ""
    app.command("logs")(flags.typer_command(flags.LogsOptions, logs.logs_command, "logs", doc))
    from .delete import delete

    app.command("delete")(delete)
    from .rerun import rerun

    app.command("rerun")(rerun)
    from .schedule import schedule_app

    app.add_typer(schedule_app, name="schedule")
