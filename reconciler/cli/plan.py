"""``astra plan`` and ``astra apply`` as typer commands, made from their options
(``reconciler.cli.flags``: ``PlanOptions``, ``ApplyOptions``) over the typer-free bodies
(``reconciler.cli.planning.plan_command``, ``reconciler.cli.applying.apply_command``), which the
plain argv route calls alike; and the typer forms of the options other commands share.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from . import flags
from .applying import apply_command
from .planning import plan_command

__all__ = [
    "AllowEmpty",
    "Files",
    "GitPath",
    "GitRef",
    "GitTokenFile",
    "GitUrl",
    "Prune",
    "SourceName",
    "StateUrl",
    "apply",
    "plan",
]

Files = Annotated[list[Path] | None, flags.typer_info(flags.FILES)]
Prune = Annotated[bool, flags.typer_info(flags.PRUNE)]
AllowEmpty = Annotated[bool, flags.typer_info(flags.ALLOW_EMPTY)]
SourceName = Annotated[str | None, flags.typer_info(flags.SOURCE)]
StateUrl = Annotated[str | None, flags.typer_info(flags.STATE)]
GitUrl = Annotated[str | None, flags.typer_info(flags.GIT)]
GitRef = Annotated[str | None, flags.typer_info(flags.REF)]
GitPath = Annotated[str | None, flags.typer_info(flags.PATH)]
GitTokenFile = Annotated[str | None, flags.typer_info(flags.GIT_TOKEN_FILE)]


plan: Any = flags.typer_command(
    flags.PlanOptions,
    plan_command,
    "plan",
    plan_command.__doc__ or "",
)

apply: Any = flags.typer_command(
    flags.ApplyOptions,
    apply_command,
    "apply",
    apply_command.__doc__ or "",
)
