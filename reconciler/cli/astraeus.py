"""``astra astraeus run | workers | logs``: the seeds' imperative commands.

Thin: flags in, one document from ``reconciler.submit`` or one API call, a table out.
"""

from __future__ import annotations

from typing import Annotated

import typer

from . import flags
from .get import workers_command
from .options import ApiServerOpt, TokenOpt
from .output import echo, error

__all__ = ["astraeus_app"]

astraeus_app = typer.Typer(
    name="astraeus",
    help="Runs on an Astraeus cluster, one command at a time (the seeds' CLI).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


def _fail(message: str) -> typer.Exit:
    error(message)
    return typer.Exit(1)


@astraeus_app.command(context_settings={"allow_interspersed_args": False})
def run(
    command: Annotated[
        list[str] | None, typer.Argument(help="The command and its arguments, after --.")
    ] = None,
    name: Annotated[str, typer.Option("--name", help="The run's name.")] = ...,  # type: ignore[assignment]
    image: Annotated[
        str | None,
        typer.Option("--image", help="The container image (recorded; see README). Needed unless --template."),
    ] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", help="GPUs for the run.")] = None,
    cpus: Annotated[
        int | None, typer.Option("--cpus", help="CPU cores: per GPU with --gpus, else per worker.")
    ] = None,
    mem: Annotated[
        str | None, typer.Option("--mem", help="Memory (120G, 32Gi): per GPU with --gpus.")
    ] = None,
    time: Annotated[str | None, typer.Option("--time", help="Time limit: 12h, 1h30m, 1:00:00.")] = None,
    template: Annotated[
        str | None,
        typer.Option("--template", help="Write the run on this template: its fields win over the defaults."),
    ] = None,
    sets: Annotated[
        list[str] | None,
        typer.Option("--set", help="A template parameter, key=value (a YAML value); repeatable."),
    ] = None,
    server: ApiServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Start a run: workers start independently, and a failed one is not restarted.

    With --template, the run is written on that template (found as for validate: the nearest
    templates/ upward, ASTRA_TEMPLATE_PATH, then the shipped ones) and --set gives its
    parameters: the template's fields win over this command's defaults (a gang template gives a
    gang), and only the flags given override them.

    Examples:

        astra astraeus run --name llama-ft --image nvcr.io/nvidia/pytorch:24.08-py3
        --gpus 16 --cpus 12 --mem 120G --time 12h -- sh -c 'torchrun ... train.py'

        astra astraeus run --name llama-ft --template gang --set gpus=16
    """
    # Over 60 lines: its signature is its options' one declaration (typer's); the body is under 30. (A
    # comment, not the docstring: the docstring is its --help.)
    from ..submit import SubmitError, run_document, with_cli_defaults
    from .remote import CommandError, call

    if template is None and sets:
        raise _fail("--set gives template parameters: add --template NAME")
    if template is None and image is None:
        raise _fail("give --image IMAGE (or --template NAME, whose image is used)")
    try:
        argv = list(command or [])
        plain = template is None
        doc = run_document(name, image, argv, gpus=gpus, cpus=cpus, mem=mem, time=time, defaults=plain)
    except SubmitError as exc:
        raise _fail(str(exc)) from exc
    if template is not None:
        doc = with_cli_defaults(_with_template(doc, template, sets or []))
    try:
        body = call("POST", "/runs", server=server, token=token, json=doc).json()
    except CommandError as exc:
        raise _fail(str(exc)) from exc
    from ..wire import console_url

    status = body.get("status", {})
    echo(
        f"{body['metadata']['name']} submitted to {status.get('workspace', 'default')}: "
        f"{console_url(status.get('url', ''))}"
    )


def _with_template(doc: dict, template: str, sets: list[str]) -> dict:
    """The flags' document written on ``template``, with ``sets`` as its parameters: what
    validate and apply would see (the template found from the working folder)."""
    import json
    import tempfile
    from dataclasses import replace
    from pathlib import Path

    from ..desired import load_desired
    from ..templates import TemplateLibrary

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{doc['metadata']['name']}.json"
        path.write_text(json.dumps(doc))
        desired = load_desired([path], template=template, sets=sets, library=TemplateLibrary())
    if desired.errors:
        for e in desired.errors:  # the flags' document is no file of the user's: the command line
            shown = replace(e, file="<command line>", line=None, column=None) if e.file == str(path) else e
            echo(shown.format(), err=True)
        raise _fail(f"the run does not fit template {template}")
    return desired.runs[0].data


#: ``astra astraeus workers`` (and ``astra get workers``, the same command under a second name)
workers = flags.typer_command(flags.WorkersOptions, workers_command, "workers", workers_command.__doc__ or "")
astraeus_app.command()(workers)


@astraeus_app.command()
def logs(
    worker: Annotated[str, typer.Argument(help="The worker, e.g. sweep-17.")],
    attempt: Annotated[
        int | None, typer.Option("--attempt", help="That attempt's output (default: the latest).")
    ] = None,
    server: ApiServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Print a worker's output (on Slurm: from its job's output files)."""
    import sys

    from ..clusters import ClusterError
    from .connect import connect
    from .logs import read_log
    from .runviews import CommandFailed

    try:
        text = read_log(connect(server, token, start=False), worker, attempt)
    except (ClusterError, CommandFailed) as exc:
        raise _fail(str(exc)) from exc
    sys.stdout.write(text)
