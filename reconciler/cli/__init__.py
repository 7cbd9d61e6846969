"""The ``astra`` command line: thin typer commands over the package's layers.

Commands import what they need when they run, so each pays only for its own imports. No
traceback reaches a user: ``main`` turns every error into one line and exit code 1 (usage
errors too, so that ``--detailed-exitcode``'s 2 always means "changes").
"""

from __future__ import annotations

import os
import sys
from typing import Any

from ..collector import gc_paused

__all__ = ["app", "main"]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    # a short-lived command that keeps every document it reads (trees, no cycles): the cycle
    # collector would walk them again and again, from the first import on; and when this
    # process ends here, what it made is garbage all at once, which the collector would walk
    # (30 ms after a plan of 10,000 runs) for the memory the exit gives back anyway: frozen
    with gc_paused(pause=bool(args) and args[0] in _PAUSED, exiting=argv is None):
        fast = _fast_call(args)
        if args in (["--version"], ["-V"]):  # said without typer's import
            from .output import version_line

            sys.stdout.write(version_line() + "\n")
            code = 0
        elif fast is not None:  # plain arguments, without typer: typer imports pydantic (100+ ms)
            code = _guarded(*fast)
        else:
            from .app import run

            code = run(args)
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # `astra … | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if argv is None and args[:1] == ["validate"]:
        _end(code)
    raise SystemExit(code)


def _end(code: Any) -> None:
    """End this process now, without Python's teardown of its modules and objects (10 ms of a
    validate of 10,000 files, for memory the exit gives back anyway). Only validate does: it
    writes no file and leaves nothing to do at exit (no thread, no exit handler, its log lines
    written as they come); another thread running, and it ends as usual."""
    from ..cores import alone

    if not alone():
        return
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)


#: The commands that run without typer when their arguments are plain (``flags.parse``: anything
#: else, an unknown option say, goes to typer, which answers as for any command; both routes call
#: the same function with the same options): the words that name each, its options (``flags``)
#: and its body (module, function), whose docstring is its help (``--help`` alone: ``plainhelp``).
#: It saves typer's import, and typer's app made of every command:
#: ``astra validate examples/laptop`` took 283 ms by this route and 724 ms through typer
#: (medians of 9 runs, 2 December 2026, on the project's shared 2-core machine under load);
#: the reads typed all day likewise (docs/performance.md, "The commands typed all day").
_PLAIN: dict[tuple[str, ...], tuple[str, str, str]] = {
    ("validate",): ("ValidateOptions", "validating", "validate_command"),
    ("plan",): ("PlanOptions", "planning", "plan_command"),
    ("apply",): ("ApplyOptions", "applying", "apply_command"),
    ("force-unlock",): ("UnlockOptions", "applying", "force_unlock_command"),
    ("get", "runs"): ("GetRunsOptions", "get", "runs_command"),
    ("get", "workers"): ("WorkersOptions", "get", "workers_command"),
    ("describe", "run"): ("DescribeRunOptions", "describe", "run_command"),
    ("logs",): ("LogsOptions", "logs", "logs_command"),
    ("status",): ("SourcesOptions", "sources", "status_command"),
    ("source", "list"): ("SourcesOptions", "sources", "list_command"),
}
#: The commands whose whole run has the cyclic collector paused (``collector``), here and nowhere
#: else in the CLI: a short-lived process that keeps every document it reads (trees without
#: cycles). ``apply --wait`` lets it run again while it follows the runs (``collector.resumed``:
#: that may last hours), as ``get runs --watch`` does between its looks; ``get`` keeps every row
#: of a listing of 10,000 runs until it prints them (the collector walked them: 8 ms).
_PAUSED = frozenset({"validate", "plan", "apply", "get"})


def _fast_call(args: list[str]) -> tuple[Any, Any] | None:
    """The command and its options when ``args`` are plain (see ``_PLAIN``); else ``None``."""
    words = next((w for w in (tuple(args[:2]), tuple(args[:1])) if w in _PLAIN), None)
    if words is None:
        return None
    from importlib import import_module

    from . import flags

    declared, module, function = _PLAIN[words]
    rest = args[len(words) :]
    if rest in (["--help"], ["-h"]):  # its help, from the same options and the body's docstring
        body = getattr(import_module(f".{module}", __name__), function)
        return _helped, ("astra " + " ".join(words), getattr(flags, declared), body.__doc__ or "")
    options = flags.parse(getattr(flags, declared), rest)
    if options is None:
        return None
    return getattr(import_module(f".{module}", __name__), function), options


def _helped(asked: tuple[str, type, str]) -> int:
    """Print a plain command's help (``plainhelp``: typer's text, without typer)."""
    from .plainhelp import help_text

    sys.stdout.write(help_text(*asked))
    return 0


def _guarded(command: Any, options: Any) -> int:
    """As ``app.run`` does for typer's commands: one line and exit code 1, never a traceback."""
    from .guard import guarded

    return guarded(lambda: command(options))


def __getattr__(name: str):
    if name == "app":
        from .app import app

        return app
    raise AttributeError(name)
