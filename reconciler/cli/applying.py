"""``astra apply`` and ``astra force-unlock`` without typer: what their commands do, called by
typer's commands (``reconciler.cli.plan``, ``reconciler.cli.watch``) and, when the arguments
are plain, straight from ``reconciler.cli.main`` (``flags.parse``), which spares typer's import.

``apply_command`` makes three calls into the library, as Terraform does: the source's lock and
its plan (``apply.locked``, ``reconcile.plan_source``; or a saved plan), then, once the plan is
shown and the user asked (``reviewing``), ``apply.apply_locked`` with the plan it showed (a dry
run: ``apply.check_plan``); it prints the outcome. ``force_unlock_command`` clears a lock. Both
return the exit code; our errors become one line and exit 1 (``planning.failures``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from .output import echo, error
from .planning import Exit, Setup, apply_setup, failures, setup

__all__ = ["apply_command", "force_unlock_command"]


def apply_command(options: Any) -> int:
    """Apply the files (-f) or a saved plan (PLANFILE) to the cluster: exactly what the plan shows.

    Shows the plan and asks (type 'yes'), unless --yes; with no terminal to ask on it refuses
    without --yes. One apply per source at a time (a lock; see 'astra force-unlock'). A saved
    plan is refused when the files or the runs changed since it was made.

    Examples:

        astra apply -f examples/laptop --yes --wait

        astra plan -f runs/ --out plan.json && astra apply plan.json

        astra apply -f runs/ --revision 3f8a819 --yes   (a rollback: the files as of that commit)
    """
    # its help, typer's and the plain route's; the body of astra apply: the exit code
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

            options, declared = configured(options, saved_plan=planfile is not None)
            saved, s = apply_setup(planfile, options)
            with progress:
                done = _planned_and_applied(saved, s, options, progress, declared)
            return _outcome(
                done, s.cluster, verbose=options.verbose, wait=options.wait, settle=options.settle
            )
    except Exit as ended:  # said already (``failures``, the saved plan)
        return ended.code


def _planned_and_applied(saved: Any, s: Setup, options: Any, progress: _Progress, declared: Any) -> Any:
    """Lock (unless a dry run), plan (or take ``saved``), review (``reviewing``), then apply or
    check: a ``SourceApplied``. The lock is taken before the plan and held while the user is
    asked; the secrets and alerts astra.yaml declares (``declared``, with ``-c``) are set first."""
    from contextlib import nullcontext

    from ..apply import SourceApplied, apply_locked, check_plan, locked, refuse_dirty
    from ..load import default_cache
    from ..reconcile import plan_source
    from ..state import owner
    from .declaring import apply_declared, declared_plan
    from .reviewing import reviewed

    dry = options.dry_run
    name = saved.source if saved is not None else s.source.name
    held = nullcontext() if dry else locked(s.store, name, who=owner(), now=time.time)
    with held as lock:
        fresh = saved is None
        made = (
            saved
            if not fresh
            else plan_source(s.source, s.cluster, s.store, time.time(), cache=default_cache())
        )
        folder = options.files[0] if options.files else None
        made, extra = declared_plan(made, s, declared, saved=not fresh, folder=folder)
        if not dry:
            refuse_dirty(made, allow_dirty=options.allow_dirty)
        if not reviewed(made, s.cluster, options):
            return SourceApplied(made, dry_run=dry)
        if dry:
            return check_plan(made, s.cluster)
        assert lock is not None  # held: not a dry run
        progress.start(made)
        apply_declared(made, s.cluster, extra)
        return apply_locked(
            made,
            s.source,
            s.cluster,
            s.store,
            lock,
            now=time.time,
            fresh=fresh,
            on_entry=progress.advance,
        )


def force_unlock_command(options: Any) -> int:
    """Clear a stale apply lock (left by an apply that was killed). Be sure no apply is running."""
    # its help, typer's and the plain route's; the body of astra force-unlock ID
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
