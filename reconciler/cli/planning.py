"""The body of ``astra plan`` and the steps ``apply``, ``watch`` and ``status`` share, free of
typer: ``astra plan`` with plain arguments runs ``plan_command`` without importing typer at all
(``reconciler.cli.fast``), and the typer command calls the same function.

``Exit(code)`` ends a command with that code (``app.run`` and ``reconciler.cli.main`` turn it
into the exit code); ``failures()`` turns our errors into one line and ``Exit(1)``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .output import echo, error

__all__ = ["Exit", "Setup", "failures", "plan_command", "plan_files", "require_files", "setup"]


class Exit(Exception):
    """End the command with ``code`` (what it had to say is said already)."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


@dataclass
class Setup:
    source: Any
    cluster: Any
    store: Any


def setup(
    paths: list[str],
    *,
    source: str | None,
    state: str | None,
    server: str | None,
    token: str | None,
    template: str | None = None,
    sets: list[str] | None = None,
    prune: bool = False,
    allow_empty: bool = False,
) -> Setup:
    """The source, the cluster (with retries) and the store the options name."""
    from ..reconcile import Source, retrying
    from ..state import default_source_name, open_store
    from .connect import connect

    cluster = connect(server, token)
    name = source or default_source_name(paths)
    src = Source(name, tuple(paths), template, tuple(sets or ()), prune, allow_empty)
    return Setup(src, retrying(cluster), open_store(state, cluster))


def plan_files(paths: list[str], **options: Any) -> tuple[Setup, Any]:
    """``setup`` with the options, then the plan of the files (the local cache used)."""
    from ..load import default_cache
    from ..reconcile import plan_source

    s = setup(paths, **options)
    _, made = plan_source(s.source, s.cluster, s.store, time.time(), cache=default_cache())
    return s, made


@contextmanager
def failures() -> Iterator[None]:
    """Our errors as one line and ``Exit(1)`` (the files' problems one per line first)."""
    from ..apply import ApplyFailed
    from ..clusters.base import ClusterError
    from ..plan import PlanError
    from ..reconcile import LoadFailed, ReconcileError
    from ..state import StateError

    try:
        yield
    except LoadFailed as exc:
        for e in exc.errors:
            echo(e.format(), err=True)
        error(str(exc))
        raise Exit(1) from None
    except (ClusterError, StateError, PlanError, ReconcileError, ApplyFailed) as exc:
        error(str(exc))
        raise Exit(1) from None


def require_files(files: list[Path] | list[str] | None) -> list[str]:
    if not files:
        error("give the run specs: -f PATH (files or folders)")
        raise Exit(1)
    return [str(f) for f in files]


def plan_command(
    files: list[Path] | list[str] | None = None,
    template: str | None = None,
    sets: list[str] | None = None,
    prune: bool = False,
    allow_empty: bool = False,
    output: str = "text",
    out: Path | str | None = None,
    detailed_exitcode: bool = False,
    verbose: bool = False,
    source: str | None = None,
    state: str | None = None,
    server: str | None = None,
    token: str | None = None,
) -> int:
    """``astra plan`` (its help is the typer command's, in ``reconciler.cli.plan``); the exit code."""
    from ..collector import gc_paused
    from ..plan import plan_to_json, render_plan

    # a plan's documents (many small trees, no cycles) are garbage only once it is printed
    with gc_paused():
        paths = require_files(files)
        with failures():
            _, made = plan_files(
                paths,
                source=source,
                state=state,
                server=server,
                token=token,
                template=template,
                sets=sets,
                prune=prune,
                allow_empty=allow_empty,
            )
        data = plan_to_json(made)
        as_json = str(output) == "json"
        text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n" if out or as_json else ""
        if out is not None:
            Path(out).write_text(text, encoding="utf-8")
        if as_json:
            sys.stdout.write(text)
        else:
            sys.stdout.write(render_plan(data, verbose=verbose))
            if out is not None:
                echo(f"Saved the plan to {out}: 'astra apply {out}' carries out exactly this plan.")
    return 2 if detailed_exitcode and made.has_changes else 0
