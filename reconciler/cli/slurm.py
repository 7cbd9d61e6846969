"""``astra slurm sbatch FILE``: a Slurm batch script submitted as an Astraeus run.

Thin: the file in, one document from ``reconciler.submit.sbatch_document``, one API call.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from .options import ApiServerOpt, TokenOpt
from .output import echo, error

__all__ = ["slurm_app"]

slurm_app = typer.Typer(
    name="slurm",
    help="Slurm's commands, on an Astraeus cluster.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


def default_name(path: Path) -> str:
    """A run name from a script's file name: sweep.sbatch → sweep."""
    name = re.sub(r"[^a-z0-9-]+", "-", path.name.split(".")[0].lower()).strip("-")
    return name if name and name[0].isalpha() else f"job-{name}".rstrip("-")


@slurm_app.command()
def sbatch(
    file: Annotated[Path, typer.Argument(help="The batch script.")],
    server: ApiServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Submit a batch script: #SBATCH --array, --gres, --cpus-per-task, --mem, --time, --container-image.

    Inside, read ASTRAEUS_ARRAY_TASK_ID: SLURM_ARRAY_TASK_ID is not set.
    """
    from ..submit import SubmitError, sbatch_document
    from .remote import CommandError, call

    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        error(f"cannot read {file}: {exc.strerror or exc}")
        raise typer.Exit(1) from exc
    try:
        doc = sbatch_document(text, str(file), default_name(file))
        body = call("POST", "/runs", server=server, token=token, json=doc).json()
    except (SubmitError, CommandError) as exc:
        error(str(exc))
        raise typer.Exit(1) from exc
    echo(f"Submitted batch job {body['metadata']['name']}")
