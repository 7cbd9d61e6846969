"""``astra apply`` and ``astra force-unlock`` without typer: what their commands do, called by
typer's commands (``reconciler.cli.plan``, ``reconciler.cli.watch``) and, when the arguments
are plain, straight from ``reconciler.cli.main`` (``_FAST``), which spares typer's import (about
100 ms of each command: a resumed apply runs three).

``apply_command`` shows the plan (``_reviewer``), asks, applies and prints the outcome;
``force_unlock_command`` clears a lock. Both return the exit code; our errors become one line
and exit 1 (``planning.failures``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .output import echo, error
from .planning import (
    Exit,
    Setup,
    failures,
    impossible_asks,
    plan_warnings,
    require_files,
    setup,
    with_outlook,
)

__all__ = ["apply_command", "force_unlock_command"]


def apply_command(
    targets: list[Path] | list[str] | None = None,
    files: list[Path] | list[str] | None = None,
    template: str | None = None,
    sets: list[str] | None = None,
    prune: bool = False,
    allow_empty: bool = False,
    yes: bool = False,
    dry_run: bool = False,
    wait: bool = False,
    settle: float = 10.0,
    verbose: bool = False,
    source: str | None = None,
    state: str | None = None,
    server: str | None = None,
    token: str | None = None,
    git: str | None = None,
    ref: str | None = None,
    path: str | None = None,
    git_token_file: str | None = None,
    revision: str | None = None,
    allow_dirty: bool = False,
    strict: bool = False,
    replace: list[str] | None = None,
) -> int:
    """``astra apply`` (its help is the typer command's, in ``reconciler.cli.plan``); the exit code."""
    from ..apply import apply_source
    from ..collector import gc_paused
    from ..load import default_cache
    from .planning import Git

    planfile, paths = _saved_plan_or_paths([Path(t) for t in targets or []], [Path(f) for f in files or []])
    if planfile is not None and paths:
        error("give a saved plan or -f PATH, not both")
        return 1
    progress = _Progress()
    review = _reviewer(progress, lambda: s.cluster, verbose=verbose, dry_run=dry_run, yes=yes, strict=strict)
    given = Git(git, ref, path, git_token_file, revision)
    try:
        with failures():
            saved, s = _setup(
                planfile,
                paths,
                source,
                state,
                server,
                token,
                template,
                sets,
                prune,
                allow_empty,
                given,
                replace,
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
            return _outcome(done, s.cluster, verbose=verbose, wait=wait, settle=settle)
    except Exit as ended:  # said already (``failures``, the saved plan)
        return ended.code


def force_unlock_command(
    lock_id: str,
    source: str | None = None,
    state: str | None = None,
    server: str | None = None,
    token: str | None = None,
) -> int:
    """``astra force-unlock ID`` (its help is the typer command's, in ``reconciler.cli.watch``)."""
    from ..state import StateError

    try:
        with failures():
            s = setup(["."], source=source or "-", state=state, server=server, token=token, start=False)
            name = source
            if name is None:
                held = [
                    src.name for src in s.store.sources() if src.lock is not None and src.lock.id == lock_id
                ]
                if not held:
                    raise StateError(f"no source holds lock {lock_id}")
                name = held[0]
            s.store.unlock(name, lock_id)
    except Exit as done:
        return done.code
    echo(f"lock {lock_id} of source {name} cleared")
    return 0


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
        seen = with_outlook(made, cluster())
        data = plan_to_json(seen)
        from .colour import enabled, paint_plan

        sys.stdout.write(paint_plan(revision_lines(data) + render_plan(data, verbose=verbose), enabled()))
        impossible = impossible_asks(seen, cluster())
        if impossible:
            for line in impossible:
                error(line)
            error("not applied: this cluster could never run these runs")
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
    """A rich progress bar on stderr while a plan with many changes is applied, when stderr is a
    terminal (a CI log or a pipe gets the outcome only, as from kubectl or Terraform); else
    nothing."""

    MANY = 10

    def __init__(self) -> None:
        self._bar: Any = None
        self._task: Any = None

    def start(self, made: Any) -> None:
        total = sum(1 for c in made.changes if c.action.value != "noop")
        if total < self.MANY or not sys.stderr.isatty():
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
