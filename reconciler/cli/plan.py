"""``astra plan`` and ``astra apply`` as typer commands, made from their options
(``reconciler.cli.flags``: ``PlanOptions``, ``ApplyOptions``) over the typer-free bodies
(``reconciler.cli.planning.plan_command``, ``reconciler.cli.applying.apply_command``), which the
plain argv route calls alike; and the typer forms of the options other commands share.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from . import flags

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


def _plan(options: flags.PlanOptions) -> int:
    from .planning import plan_command

    return plan_command(options)


def _apply(options: flags.ApplyOptions) -> int:
    from .applying import apply_command

    return apply_command(options)


plan: Any = flags.typer_command(
    flags.PlanOptions,
    _plan,
    "plan",
    """Show what apply would change, and what it costs; change nothing.

    + create, ~ update in place, -/+ replace (with the workers, GPUs and time it stops),
    - delete (only with --prune, only runs this source applied), = unchanged (with -v).

    Examples:

        astra plan -f examples/

        astra plan examples/laptop

        astra plan -f runs/ --prune --out plan.json --detailed-exitcode

        astra plan --git https://github.com/acme/runs.git --ref main --path runs -o markdown

        astra plan -f runs/ --replace nightly-eval   (rerun it, the plan reviewed)

        astra plan -c astra.yaml --source team-a --age-identity age.txt   (its secrets and alerts too)
    """,
)

apply: Any = flags.typer_command(
    flags.ApplyOptions,
    _apply,
    "apply",
    """Apply the files (-f) or a saved plan (PLANFILE) to the cluster: exactly what the plan shows.

    Shows the plan and asks (type 'yes'), unless --yes; with no terminal to ask on it refuses
    without --yes. One apply per source at a time (a lock; see 'astra force-unlock'). A saved
    plan is refused when the files or the runs changed since it was made.

    Examples:

        astra apply -f examples/laptop --yes --wait

        astra plan -f runs/ --out plan.json && astra apply plan.json

        astra apply -f runs/ --revision 3f8a819 --yes   (a rollback: the files as of that commit)
    """,
)
