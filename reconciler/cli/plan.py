"""``astra plan`` and ``astra apply``: thin commands over ``reconciler.reconcile`` and ``reconciler.apply``.

Each parses its options, makes one call into the package for each step (load and plan; apply;
wait), and prints. Our errors become one line and exit 1; ``--detailed-exitcode`` keeps 2 for
"changes" only.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from .options import ServerOpt, TokenOpt
from .output import echo, error
from .planning import (
    Exit,
    Setup,
    failures,
    impossible_asks,
    plan_command,
    plan_warnings,
    require_files,
    setup,
    with_outlook,
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
            "a restart) or ends (Batch); 1 naming each that failed or restarted.",
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
    from ..apply import apply_source
    from ..collector import gc_paused
    from ..load import default_cache
    from .planning import Git

    planfile, files = _saved_plan_or_paths(targets or [], files)
    if planfile is not None and files:
        error("give a saved plan or -f PATH, not both")
        raise Exit(1)
    progress = _Progress()
    review = _reviewer(progress, lambda: s.cluster, verbose=verbose, dry_run=dry_run, yes=yes, strict=strict)
    given = Git(git, ref, path, git_token_file, revision)
    with failures():
        saved, s = _setup(
            planfile, files, source, state, server, token, template, sets, prune, allow_empty, given, replace
        )
        with progress, gc_paused():  # the plan's documents are trees without cycles: see collector
            done = apply_source(
                s.source,
                s.cluster,
                s.store,
                plan=saved,
                cache=None if saved is not None else default_cache(),
                review=review,
                dry_run=dry_run,
                on_entry=progress.advance,
                allow_dirty=allow_dirty,
            )
        raise Exit(_outcome(done, s.cluster, verbose=verbose, wait=wait, settle=settle))


def _reviewer(
    progress: _Progress,
    cluster: Callable[[], Any],
    *,
    verbose: bool,
    dry_run: bool,
    yes: bool,
    strict: bool,
) -> Any:
    """``apply_source``'s review: show the plan; refuse runs no machine of the cluster could hold
    (and, ``strict``, warnings); ask, when it changes something (unless --yes or --dry-run)."""
    from ..plan import Plan, plan_to_json, render_plan
    from ..plan.render_markdown import revision_lines

    def review(made: Plan) -> bool:
        data = plan_to_json(with_outlook(made, cluster()))
        from .colour import enabled, paint_plan

        sys.stdout.write(paint_plan(revision_lines(data) + render_plan(data, verbose=verbose), enabled()))
        impossible = impossible_asks(made, cluster())
        if impossible:
            for line in impossible:
                error(line)
            error("not applied: no machine of the cluster could hold these runs")
            return False
        warned = plan_warnings(made)
        for line in warned:
            echo(line, err=True)
        if strict and warned:
            error("not applied: there are warnings, and --strict makes them errors")
            return False
        if dry_run:
            return True
        if made.has_changes and not yes and not _confirm(made.source, made.cluster):
            return False
        progress.start(made)
        return True

    return review


def _saved_plan_or_paths(
    targets: list[Path], files: list[Path] | None
) -> tuple[Path | None, list[Path] | None]:
    """The saved plan and the ``-f`` files: one JSON file holding a saved plan
    (``format_version``) is a plan; other arguments are paths, as with ``-f``."""
    plan: Path | None = None
    if len(targets) == 1 and targets[0].suffix == ".json" and targets[0].is_file():
        try:
            data = json.loads(targets[0].read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {"format_version": None}  # said when it is read as a plan
        if isinstance(data, dict) and "format_version" in data:
            plan, targets = targets[0], []
    return plan, [*(files or []), *targets] or None


def _setup(
    planfile: Path | None,
    files: list[Path] | None,
    source: str | None,
    state: str | None,
    server: str | None,
    token: str | None,
    template: str | None,
    sets: list[str] | None,
    prune: bool,
    allow_empty: bool,
    git: Any = None,
    replace: list[str] | None = None,
) -> tuple[Any, Setup]:
    """The saved plan (``None`` for -f) and the source, cluster and store the options name."""
    from ..plan import plan_from_json

    if planfile is None:
        paths = require_files(files, git)
        made = setup(
            paths,
            source=source,
            state=state,
            server=server,
            token=token,
            template=template,
            sets=sets,
            prune=prune,
            allow_empty=allow_empty,
            git=git,
            replace=replace or (),
        )
        return None, made
    try:
        saved = plan_from_json(json.loads(planfile.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        error(f"cannot read the plan {planfile}: {exc}")
        raise Exit(1) from None
    return saved, setup([str(planfile.parent)], source=saved.source, state=state, server=server, token=token)


def _outcome(done: Any, cluster: Any, *, verbose: bool, wait: bool, settle: float = 10.0) -> int:
    """Print what ``apply_source`` did; the exit code (``--wait``: once the runs settled)."""
    from ..collector import gc_paused
    from ..plan import render_apply

    if done.dry_run:
        for p in done.problems:
            echo(p, err=True)
        echo("Dry run: nothing was applied.")
        return 0 if done.ok else 1
    if done.result is None:  # not confirmed: said already
        return 1
    if done.plan.has_changes or not done.result.ok or verbose:
        with gc_paused():  # an entry a run: not a cycle among them
            sys.stdout.write(render_apply(done.result.to_json(), verbose=verbose))
    if not done.result.ok:
        return 1
    if wait:
        from .waiting import wait_and_report

        kept = [c for c in done.plan.changes if c.action.value != "delete"]
        fresh = [c.address for c in kept if c.action.value in ("create", "replace")]
        return wait_and_report(cluster, [c.address for c in kept], fresh, settle)
    return 0


def _confirm(source: str, cluster: str) -> bool:
    """Whether the user types 'yes' (said why not, when not)."""
    if not sys.stdin.isatty():
        error("no terminal to ask on: give --yes to apply without asking")
        return False
    echo(f"Apply these changes to source {source} on {cluster}? Only 'yes' goes on.")
    try:
        answer = input("Enter a value: ").strip().lower()
    except EOFError:
        answer = ""
    if answer != "yes":
        error("not applied: the answer was not 'yes'")
        return False
    return True


class _Progress:
    """A rich progress bar on stderr while a plan with many changes is applied; else nothing."""

    MANY = 10

    def __init__(self) -> None:
        self._bar: Any = None
        self._task: Any = None

    def start(self, made: Any) -> None:
        total = sum(1 for c in made.changes if c.action.value != "noop")
        if total < self.MANY:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(
            TextColumn("applying"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._bar.__enter__()
        self._task = self._bar.add_task("apply", total=total)

    def advance(self, _entry: Any) -> None:
        if self._bar is not None:
            self._bar.advance(self._task)

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
