"""The ``astra`` command line: thin typer commands over the package's layers.

Commands import what they need when they run, so each pays only for its own imports. No
traceback reaches a user: ``main`` turns every error into one line and exit code 1 (usage
errors too, so that ``--detailed-exitcode``'s 2 always means "changes").
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from ..collector import gc_paused

__all__ = ["app", "main", "validate_command"]


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


def validate_command(
    paths: Sequence[str | os.PathLike[str]],
    as_json: bool,
    template: str | None = None,
    sets: list[str] | tuple[str, ...] = (),
    strict: bool = False,
) -> int:
    """``astra validate``: print every problem; 0 when all documents are valid, 1 otherwise.

    Runs that name a template (or ``template``/``sets``: ``--template``, ``--set``) are rendered
    and merged first; what is validated is the final run, as plan and apply see it. Warnings
    (``reconciler.runspec.lint``; of files without errors) are printed after the errors, on
    stderr, and leave the exit code 0; ``strict``: they are errors (and in ``-o json``'s list).
    """
    from dataclasses import replace

    from ..check import check
    from ..runspec.errors import ErrorType
    from .output import echo, print_json

    # a short-lived process that keeps every document: the cycle collector would rescan them
    # all again and again for nothing (measured in `task bench`)
    with gc_paused():
        checked = check(paths, template=template, sets=sets)
    errors, warnings = checked.errors, checked.warnings
    if strict and warnings:
        strict_errors = [replace(w, type=ErrorType.invalid) for w in warnings]
        errors, warnings = sorted(errors + strict_errors, key=lambda e: e.sort_key()), []
    files = len(checked.files | {e.file for e in errors if e.file != "<command line>"})
    if as_json:  # the errors alone (--strict: and the warnings), as the contract's list
        print_json([e.to_json() for e in errors])
    else:
        from .colour import enabled, paint_problem

        out_on, err_on = enabled(sys.stdout), enabled(sys.stderr)
        for e in errors:
            echo(paint_problem(e.format(), out_on))
        for w in warnings:
            echo(paint_problem(w.format(), err_on, warning=True), err=True)
        bad = len({e.file for e in errors if e.file != "<command line>"})
        if errors:
            noun = "problem" if len(errors) == 1 else "problems"
            where = [f"in {bad} of {files} files"] if bad else []
            if any(e.file == "<command line>" for e in errors):
                where.append("on the command line")
            echo(f"{len(errors)} {noun} {' and '.join(where)}", err=True)
        else:
            docs = "1 document" if checked.documents == 1 else f"{checked.documents} documents"
            in_files = "1 file" if files == 1 else f"{files} files"
            echo(f"{docs} in {in_files} {'is' if checked.documents == 1 else 'are'} valid", err=True)
    return 1 if errors else 0


#: The commands that run without typer when their arguments are plain: each option's parameter
#: and kind (a flag; a value; a value that may repeat, gathered in a list), the parameter that
#: takes the positional arguments, and the parameters read from the environment when not given.
#: Anything else (``--help``, ``--``, an unknown option, a value out of its choices) goes to
#: typer, which answers as for any command; both routes call the same function. It saves
#: typer's import: ``astra validate examples/laptop`` takes 111 ms by this route and 279 ms through
#: typer (medians of 15 runs each). ``tests/plan/test_cli.py`` checks it against every option typer
#: declares for each of these commands.
#: The options of a source's state and server (every command of the fast route but validate).
_CONNECTION = {
    "--source": ("source", "value"),
    "--state": ("state", "value"),
    "--server": ("server", "value"),
    "--token": ("token", "value"),
}
#: The options that say a source (its files, templates, git, state and server): plan's and apply's.
_SOURCE = {
    **_CONNECTION,
    "-f": ("files", "list"),
    "--file": ("files", "list"),
    "--template": ("template", "value"),
    "--set": ("sets", "list"),
    "--prune": ("prune", "flag"),
    "--allow-empty": ("allow_empty", "flag"),
    "-v": ("verbose", "flag"),
    "--verbose": ("verbose", "flag"),
    "--git": ("git", "value"),
    "--ref": ("ref", "value"),
    "--path": ("path", "value"),
    "--git-token-file": ("git_token_file", "value"),
    "--revision": ("revision", "value"),
    "--strict": ("strict", "flag"),
    "--replace": ("replace", "list"),
}
_SERVER_ENV = {"server": "ASTRA_SERVER", "token": "ASTRA_TOKEN"}
_FAST: dict[str, tuple[dict[str, tuple[str, str]], str | None, dict[str, str]]] = {
    "validate": (
        {
            "-o": ("output", "value"),
            "--output": ("output", "value"),
            "--template": ("template", "value"),
            "--set": ("sets", "list"),
            "--strict": ("strict", "flag"),
        },
        "paths",
        {},
    ),
    "plan": (
        {
            **_SOURCE,
            "-o": ("output", "value"),
            "--output": ("output", "value"),
            "--out": ("out", "value"),
            "--detailed-exitcode": ("detailed_exitcode", "flag"),
        },
        "paths",
        _SERVER_ENV,
    ),
    "apply": (
        {
            **_SOURCE,
            "-y": ("yes", "flag"),
            "--yes": ("yes", "flag"),
            "--dry-run": ("dry_run", "flag"),
            "--wait": ("wait", "flag"),
            "--settle": ("settle", "value"),
            "--allow-dirty": ("allow_dirty", "flag"),
        },
        "targets",
        _SERVER_ENV,
    ),
    "force-unlock": (_CONNECTION, "lock_id", _SERVER_ENV),
}
#: Each command's options that take one of a few values (its typer Enum's).
_CHOICES: dict[str, dict[str, tuple[str, ...]]] = {
    "validate": {"output": ("text", "json")},
    "plan": {"output": ("text", "json", "markdown")},
    "apply": {},
    "force-unlock": {},
}
#: The commands whose whole run has the cyclic collector paused (``collector``): a short-lived
#: process that keeps every document it reads. An apply pauses it while it plans and applies,
#: not while ``--wait`` follows the runs (that may last hours).
_PAUSED = frozenset({"validate", "plan"})


def _fast_call(args: list[str]) -> tuple[Any, dict[str, Any]] | None:
    """The command and its arguments when ``args`` are plain (see ``_FAST``); else ``None``."""
    given = _given(args)
    if given is None:
        return None
    if args[0] == "validate":
        if not given.get("paths"):
            return None
        return validate_command, {
            "paths": given["paths"],
            "as_json": given.get("output") == "json",
            "template": given.get("template"),
            "sets": given.get("sets", ()),
            "strict": given.get("strict", False),
        }
    if args[0] == "apply":
        if "settle" in given:  # a number of seconds, at least 0; else typer says what is wrong
            try:
                given["settle"] = float(given["settle"])
            except ValueError:
                return None
            if not given["settle"] >= 0:
                return None
        from .applying import apply_command

        return apply_command, given
    if args[0] == "force-unlock":
        ids = given.pop("lock_id", [])
        if len(ids) != 1:  # one lock: else typer says what is missing or extra
            return None
        from .applying import force_unlock_command

        return force_unlock_command, {"lock_id": ids[0], **given}
    from .planning import plan_command

    return plan_command, given


def _given(args: list[str]) -> dict[str, Any] | None:
    """The parameters of a command with plain arguments (see ``_FAST``); else ``None``."""
    if not args or args[0] not in _FAST:
        return None
    options, positional, environ = _FAST[args[0]]
    given: dict[str, Any] = {}
    rest = iter(args[1:])
    for arg in rest:
        name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg[:2], "", arg[2:])
        if not arg.startswith("-") or arg == "-":
            if positional is None:
                return None
            given.setdefault(positional, []).append(arg)
            continue
        if name not in options:
            return None
        param, kind = options[name]
        if kind == "flag":
            if eq or inline:
                return None
            given[param] = True
            continue
        value = inline if (eq or inline) else next(rest, None)
        if value is None or value not in _CHOICES[args[0]].get(param, (value,)):
            return None
        if kind == "list":
            given.setdefault(param, []).append(value)
        else:
            given[param] = value
    for param, variable in environ.items():
        if param not in given and os.environ.get(variable):
            given[param] = os.environ[variable]
    return given


def _guarded(command: Any, arguments: dict[str, Any]) -> int:
    """As ``app.run`` does for typer's commands: one line and exit code 1, never a traceback."""
    from .guard import guarded

    return guarded(lambda: command(**arguments))


def __getattr__(name: str):
    if name == "app":
        from .app import app

        return app
    raise AttributeError(name)
