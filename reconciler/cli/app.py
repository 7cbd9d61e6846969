"""The typer application: every ``astra`` command is registered here."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer
from typer._click import exceptions as cx  # typer ships its own copy of click from 0.26 on
from typer.models import DefaultPlaceholder

from . import flags
from .guard import guarded
from .helpgroup import WholeFirstSentence
from .output import echo, error
from .validating import validate_command

__all__ = ["app", "run"]

app = typer.Typer(
    name="astra",
    cls=WholeFirstSentence,
    help=(
        "astra: declarative runs on an Astraeus GPU cluster.\n\n"
        "Commit run specs (YAML) to a repo; astra validates them against the published JSON "
        "Schema, diffs them against the cluster, shows the plan and applies it."
    ),
    no_args_is_help=True,
    add_completion=True,  # --install-completion, --show-completion (typer's, for bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from .output import version_line

        echo(version_line())
        raise typer.Exit(0)


@app.callback()
def _astra(
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", help="Print astra's version and exit.", callback=_version, is_eager=True
        ),
    ] = False,
) -> None:
    """astra: declarative runs on an Astraeus GPU cluster."""


class SchemaKind(StrEnum):
    run = "run"
    template = "template"
    astra = "astra"


app.command("validate")(
    flags.typer_command(
        flags.ValidateOptions,
        validate_command,
        "validate",
        validate_command.__doc__ or "",
    )
)


@app.command()
def schema(
    kind: Annotated[
        SchemaKind, typer.Argument(help="run: a run spec; template: a template; astra: astra.yaml.")
    ],
) -> None:
    """Print the published JSON Schema (draft-07) of a run spec or a template.

    The same schema is checked in as schema/run.schema.json and schema/template.schema.json,
    for editors: point yaml-language-server at it with a modeline,
    '# yaml-language-server: $schema=schema/run.schema.json'.
    """
    from ..runspec.astrafile import astra_schema
    from ..runspec.schema import dumps, run_schema, template_schema

    made = {SchemaKind.run: run_schema, SchemaKind.template: template_schema, SchemaKind.astra: astra_schema}
    echo(dumps(made[kind]()).rstrip("\n"))


def _register() -> None:
    from .astraeus import astraeus_app
    from .drive import drive_app
    from .secret import secret_app
    from .server import server_app
    from .slurm import slurm_app
    from .source import source_app
    from .template import template_app

    app.add_typer(template_app, name="template")
    from . import plan as plan_cli
    from . import watch as watch_cli

    app.command("plan")(plan_cli.plan)
    app.command("apply")(plan_cli.apply)
    app.command("watch")(watch_cli.watch)
    app.command("status")(watch_cli.status)
    app.command("force-unlock")(watch_cli.force_unlock)
    from . import history as history_cli

    app.command("history")(history_cli.history)
    app.command("diff")(history_cli.diff)
    from .console import console

    app.command("console")(console)
    app.add_typer(server_app, name="server")
    app.add_typer(astraeus_app, name="astraeus")
    app.add_typer(slurm_app, name="slurm")
    app.add_typer(source_app, name="source")
    app.add_typer(drive_app, name="drive")
    app.add_typer(secret_app, name="secret")

    from .alert import alert_app

    app.add_typer(alert_app, name="alert")
    from . import teams as teams_cli

    teams_cli.register(app)
    from . import usage as usage_cli

    usage_cli.register(app)
    from .day2_commands import register as register_day2

    register_day2(app)
    for group in app.registered_groups:  # astra get --help, astra source --help: each line whole too
        if isinstance(group.cls, DefaultPlaceholder):
            group.cls = WholeFirstSentence


_register()


def run(argv: list[str]) -> int:
    """Run the CLI; return its exit code, never a traceback (``guard.guarded``)."""
    return guarded(lambda: _run_click(argv))


def _run_click(argv: list[str]) -> int:
    """typer's app over ``argv``, with click's own errors (usage, abort) said in one line."""
    try:
        code = app(args=argv, prog_name="astra", standalone_mode=False)
    except cx.UsageError as exc:
        if isinstance(exc, cx.NoArgsIsHelpError) if hasattr(cx, "NoArgsIsHelpError") else False:
            echo(exc.ctx.get_help() if exc.ctx else str(exc))
            return 0
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        error(f"{exc.format_message()}{hint}")
        return 1
    except cx.ClickException as exc:
        error(exc.format_message())
        return 1
    except (getattr(cx, "Abort", typer.Abort), typer.Abort):
        error("aborted")
        return 1
    return code if isinstance(code, int) else 0
