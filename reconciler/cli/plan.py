"""``astra plan`` and ``astra apply``: thin commands over ``reconciler.reconcile`` and ``reconciler.apply``.

Each parses its options, makes one call into the package for each step (load and plan; apply;
wait), and prints. Our errors become one line and exit 1; ``--detailed-exitcode`` keeps 2 for
"changes" only.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from .applying import apply_command
from .options import ServerOpt, TokenOpt
from .planning import (
    Exit,
    failures,
    plan_command,
    setup,
)

__all__ = [
    "AllowEmpty",
    "Files",
    "GitPath",
    "GitRef",
    "GitTokenFile",
    "GitUrl",
    "Prune",
    "Revision",
    "SourceName",
    "StateUrl",
    "apply",
    "failures",
    "plan",
    "setup",
]


class PlanOutput(StrEnum):
    text = "text"
    json = "json"
    markdown = "markdown"


Files = Annotated[
    list[Path] | None,
    typer.Option(
        "--file", "-f", help="Run spec files or folders (recursive); repeatable.", show_default=False
    ),
]
Template = Annotated[str | None, typer.Option("--template", help="Apply this template to every run.")]
Sets = Annotated[list[str] | None, typer.Option("--set", help="A template parameter, key=value; repeatable.")]
Prune = Annotated[
    bool, typer.Option("--prune", help="Delete runs this source applied that the files no longer hold.")
]
AllowEmpty = Annotated[
    bool, typer.Option("--allow-empty", help="With --prune: allow deleting every run of the source.")
]
SourceName = Annotated[
    str | None,
    typer.Option("--source", help="The source's name (default: the git remote and path, else the folder)."),
]
StateUrl = Annotated[
    str | None,
    typer.Option(
        "--state", help="Where sources' state is kept when the cluster keeps none (a database URL)."
    ),
]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Show unchanged runs (=) too.")]
AllowDirty = Annotated[
    bool, typer.Option("--allow-dirty", help="In CI (CI=true): apply files that differ from their commit.")
]
GitUrl = Annotated[
    str | None,
    typer.Option("--git", help="A git repository's URL: its files as of the fetched commit (not with -f)."),
]
GitRef = Annotated[str | None, typer.Option("--ref", help="With --git: a branch or a tag (default: HEAD).")]
GitPath = Annotated[str | None, typer.Option("--path", help="With --git: the folder in the repository.")]
GitTokenFile = Annotated[
    str | None, typer.Option("--git-token-file", help="With --git: a file holding an HTTPS token.")
]
Revision = Annotated[
    str | None,
    typer.Option(
        "--revision", help="The files as of this older commit (a rollback; of --git, or of -f's repo)."
    ),
]
Strict = Annotated[
    bool, typer.Option("--strict", help="Warnings (a run without a time limit, …) are errors.")
]
Replace = Annotated[
    list[str] | None,
    typer.Option(
        "--replace",
        help="Plan this run as replaced (stopped, started again) though its file is unchanged; repeatable.",
    ),
]


def plan(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Run spec files or folders, as with -f.", show_default=False),
    ] = None,
    files: Files = None,
    template: Template = None,
    sets: Sets = None,
    prune: Prune = False,
    allow_empty: AllowEmpty = False,
    output: Annotated[
        PlanOutput,
        typer.Option(
            "--output",
            "-o",
            help="text, json (the saved plan's format), or markdown (a pull request's comment).",
        ),
    ] = PlanOutput.text,
    out: Annotated[
        Path | None, typer.Option("--out", help="Save the plan here, for 'astra apply FILE'.")
    ] = None,
    detailed_exitcode: Annotated[
        bool, typer.Option("--detailed-exitcode", help="Exit 0: no changes, 2: changes, 1: error.")
    ] = False,
    verbose: Verbose = False,
    source: SourceName = None,
    state: StateUrl = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
    git: GitUrl = None,
    ref: GitRef = None,
    path: GitPath = None,
    git_token_file: GitTokenFile = None,
    revision: Revision = None,
    strict: Strict = False,
    replace: Replace = None,
) -> None:
    """Show what apply would change, and what it costs; change nothing.

    + create, ~ update in place, -/+ replace (with the workers, GPUs and time it stops),
    - delete (only with --prune, only runs this source applied), = unchanged (with -v).

    Examples:

        astra plan -f examples/

        astra plan examples/laptop

        astra plan -f runs/ --prune --out plan.json --detailed-exitcode

        astra plan --git https://github.com/acme/runs.git --ref main --path runs -o markdown

        astra plan -f runs/ --replace nightly-eval   (rerun it, the plan reviewed)
    """
    raise Exit(
        plan_command(
            files,
            template,
            sets,
            prune,
            allow_empty,
            output.value,
            out,
            detailed_exitcode,
            verbose,
            source,
            state,
            server,
            token,
            git,
            ref,
            path,
            git_token_file,
            revision,
            paths,
            strict,
            replace,
        )
    )


def apply(
    targets: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="[PLANFILE | PATH...]",
            help="A plan saved by 'astra plan --out'; or run spec files or folders, as with -f.",
            show_default=False,
        ),
    ] = None,
    files: Files = None,
    template: Template = None,
    sets: Sets = None,
    prune: Prune = False,
    allow_empty: AllowEmpty = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Apply without asking.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Plan and check everything, change nothing.")
    ] = False,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="Follow the runs until each is Ready (a Service: Running for --settle seconds without "
            "a restart) or ends (Batch); 1 naming each that failed or restarted, and at once when "
            "a worker cannot start at all or a run has spent half its restart budget (5 of 10) "
            "on the same failure.",
        ),
    ] = False,
    settle: Annotated[
        float,
        typer.Option(
            "--settle", min=0, help="With --wait: how long a Service runs without a restart to be Ready."
        ),
    ] = 10.0,
    verbose: Verbose = False,
    source: SourceName = None,
    state: StateUrl = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
    git: GitUrl = None,
    ref: GitRef = None,
    path: GitPath = None,
    git_token_file: GitTokenFile = None,
    revision: Revision = None,
    allow_dirty: AllowDirty = False,
    strict: Strict = False,
    replace: Replace = None,
) -> None:
    """Apply the files (-f) or a saved plan (PLANFILE) to the cluster: exactly what the plan shows.

    Shows the plan and asks (type 'yes'), unless --yes; with no terminal to ask on it refuses
    without --yes. One apply per source at a time (a lock; see 'astra force-unlock'). A saved
    plan is refused when the files or the runs changed since it was made.

    Examples:

        astra apply -f examples/laptop --yes --wait

        astra plan -f runs/ --out plan.json && astra apply plan.json

        astra apply -f runs/ --revision 3f8a819 --yes   (a rollback: the files as of that commit)
    """
    raise Exit(
        apply_command(
            targets,
            files,
            template,
            sets,
            prune,
            allow_empty,
            yes,
            dry_run,
            wait,
            settle,
            verbose,
            source,
            state,
            server,
            token,
            git,
            ref,
            path,
            git_token_file,
            revision,
            allow_dirty,
            strict,
            replace,
        )
    )
