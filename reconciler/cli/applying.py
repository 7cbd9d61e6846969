"""``astra apply`` and ``astra force-unlock`` without typer: what their commands do, called by
typer's commands (``reconciler.cli.plan``, ``reconciler.cli.watch``) and, when the arguments
are plain, straight from ``reconciler.cli.main`` (``flags.parse``), which spares typer's import.

``apply_command`` makes three calls into the library, as Terraform does: the source's lock and
its plan (``apply.locked``, ``reconcile.plan_source``; or a saved plan), then, once it has shown
the plan and asked here (``_review``), ``apply.apply_locked`` with the plan it showed (a dry
run: ``apply.check_plan``); it prints the outcome. ``force_unlock_command`` clears a lock. Both
return the exit code; our errors become one line and exit 1 (``planning.failures``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from .output import echo, error
from .planning import (
    Exit,
    Setup,
    failures,
    git_of,
    impossible_asks,
    plan_warnings,
    require_files,
    setup,
    shown_plan,
    source_setup,
    with_outlook,
)

__all__ = ["apply_command", "force_unlock_command"]


def apply_command(options: Any) -> int:
    """``astra apply`` of its ``ApplyOptions`` (its help is the typer command's); the exit code."""
    planfile, paths = _saved_plan_or_paths(
        [Path(t) for t in options.targets], [Path(f) for f in options.files]
    )
    if planfile is not None and paths:
        error("give a saved plan or -f PATH, not both")
        return 1
    progress = _Progress()
    try:
        with failures():
            from .declaring import configured

            if planfile is not None and options.config is not None:  # the saved plan's secrets
                options, declared = configured(dataclasses.replace(options, targets=()))
            else:
                options, declared = configured(options)
                if declared is not None:
                    paths = [Path(f) for f in options.files] or None
            saved, s = _setup(planfile, paths, options)
            with progress:
                done = _planned_and_applied(saved, s, options, progress, declared)
            return _outcome(
                done, s.cluster, verbose=options.verbose, wait=options.wait, settle=options.settle
            )
    except Exit as ended:  # said already (``failures``, the saved plan)
        return ended.code


def _planned_and_applied(saved: Any, s: Setup, options: Any, progress: _Progress, declared: Any) -> Any:
    """Lock (unless a dry run), plan (or take ``saved``), review here, then apply or check: a
    ``SourceApplied``. The lock is taken before the plan and held while the user is asked; the
    secrets and alerts astra.yaml declares (``declared``, with ``-c``) are set first."""
    from ..apply import SourceApplied, apply_locked, check_plan, locked, refuse_dirty
    from ..load import default_cache
    from ..reconcile import plan_source
    from ..state import owner
    from .declaring import apply_declared, said_applied, saved_values, with_declared

    extra: Any = None  # the declared secrets' values (never shown, never saved)

    def planned() -> Any:
        nonlocal extra
        if saved is not None:
            extra = saved_values(saved, s, declared, options.files[0] if options.files else None)
            return saved
        made = plan_source(s.source, s.cluster, s.store, time.time(), cache=default_cache())
        made, extra = with_declared(made, s, declared)
        return made

    if options.dry_run:
        made = planned()
        if not _review(made, s.cluster, options):
            return SourceApplied(made, dry_run=True)
        return check_plan(made, s.cluster)
    who = owner()
    with locked(
        s.store, saved.source if saved is not None else s.source.name, who=who, now=time.time
    ) as lock:
        made = planned()
        refuse_dirty(made, allow_dirty=options.allow_dirty)
        if not _review(made, s.cluster, options) or not _asked(made, options):
            return SourceApplied(made)
        progress.start(made)
        apply_declared(made, s.cluster, extra)
        for line in said_applied(made):
            echo(line)
        return apply_locked(
            made,
            s.source,
            s.cluster,
            s.store,
            lock,
            now=time.time,
            fresh=saved is None,
            on_entry=progress.advance,
        )


def force_unlock_command(options: Any) -> int:
    """``astra force-unlock ID`` of its ``UnlockOptions`` (its help is the typer command's)."""
    from ..state import StateError

    lock_id, source, state, server, token = (
        options.lock_id,
        options.source,
        options.state,
        options.server,
        options.token,
    )
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


def _review(made: Any, cluster: Any, options: Any) -> bool:
    """Show the plan; refuse runs no machine of the cluster could hold (and, ``--strict``,
    warnings): whether it may go on."""
    from ..plan import plan_to_json

    seen = with_outlook(made, cluster)
    sys.stdout.write(shown_plan(plan_to_json(seen), verbose=options.verbose))
    impossible = impossible_asks(seen, cluster)
    if impossible:
        for line in impossible:
            error(line)
        error("not applied: this cluster could never run these runs")
        return False
    warned = plan_warnings(made)
    for line in warned:
        echo(line, err=True)
    if options.strict and warned:
        error("not applied: there are warnings, and --strict makes them errors")
        return False
    return True


def _asked(made: Any, options: Any) -> bool:
    """Whether the user said yes (``--yes``, or a plan that changes nothing, need not ask)."""
    return not made.has_changes or options.yes or _confirm(made.source, made.cluster)


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


def _setup(planfile: Path | None, files: list[Path] | None, options: Any) -> tuple[Any, Setup]:
    """The saved plan (``None`` for -f) and the source, cluster and store the options name."""
    from ..plan import plan_from_json

    if planfile is None:
        return None, source_setup(require_files(files, git_of(options)), options)
    try:
        saved = plan_from_json(json.loads(planfile.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        error(f"cannot read the plan {planfile}: {exc}")
        raise Exit(1) from None
    s = setup(
        [str(planfile.parent)],
        source=saved.source,
        state=options.state,
        server=options.server,
        token=options.token,
    )
    return saved, s


def _outcome(done: Any, cluster: Any, *, verbose: bool, wait: bool, settle: float = 10.0) -> int:
    """Print what the apply did (a ``SourceApplied``); the exit code (``--wait``: once the runs settled)."""
    from ..plan import render_apply

    if done.dry_run:
        for p in done.problems:
            echo(p, err=True)
        echo("Dry run: nothing was applied.")
        return 0 if done.ok else 1
    if done.result is None:  # not confirmed: said already
        return 1
    if done.plan.has_changes or not done.result.ok or verbose:
        sys.stdout.write(render_apply(done.result.to_json(), verbose=verbose))
    if not done.result.ok:
        return 1
    if wait:  # it may follow them for hours: the collector runs meanwhile
        from ..collector import resumed
        from .waiting import wait_and_report

        kept = [c for c in done.plan.changes if c.action.value != "delete"]
        fresh = [c.address for c in kept if c.action.value in ("create", "replace")]
        with resumed():
            return wait_and_report(cluster, [c.address for c in kept], fresh, settle)
    return 0


def _confirm(source: str, cluster: str) -> bool:
    """Whether the user types 'yes' (said why not, when not)."""
    from .confirming import confirmed

    return confirmed(
        f"Apply these changes to source {source} on {cluster}?",
        no_terminal="no terminal to ask on: give --yes to apply without asking",
        declined="not applied: the answer was not 'yes'",
    )


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
