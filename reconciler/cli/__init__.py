"""The ``astra`` command line: thin typer commands over the package's layers.

Commands import what they need when they run, so each pays only for its own imports. No
traceback reaches a user: ``main`` turns every error into one line and exit code 1 (usage
errors too, so that ``--detailed-exitcode``'s 2 always means "changes").
"""

from __future__ import annotations

import os
import sys

__all__ = ["app", "main", "validate_command"]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    fast = _validate_args(args)
    if fast is not None:  # the common case, without typer: typer imports pydantic (70+ ms)
        code = _guarded(validate_command, *fast)
    else:
        from .app import run

        code = run(args)
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # `astra … | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    raise SystemExit(code)


def validate_command(
    paths: list[str], as_json: bool, template: str | None = None, sets: list[str] | tuple[str, ...] = ()
) -> int:
    """``astra validate``: print every problem; 0 when all documents are valid, 1 otherwise.

    Runs that name a template (or ``template``/``sets``: ``--template``, ``--set``) are rendered
    and merged first; what is validated is the final run, as plan and apply see it.
    """
    import gc

    from ..check import check
    from .output import echo, print_json

    # a short-lived process that keeps every document: the cycle collector would rescan them
    # all again and again for nothing (measured in `task bench`)
    gc.disable()
    checked = check(paths, template=template, sets=sets)
    errors = checked.errors
    files = len(checked.files | {e.file for e in errors if e.file != "<command line>"})
    if as_json:
        print_json([e.to_json() for e in errors])
    else:
        for e in errors:
            echo(e.format())
        bad = len({e.file for e in errors if e.file != "<command line>"})
        if errors:
            noun = "problem" if len(errors) == 1 else "problems"
            where = [f"in {bad} of {files} files"] if bad else []
            if any(e.file == "<command line>" for e in errors):
                where.append("on the command line")
            echo(f"{len(errors)} {noun} {' and '.join(where)}", err=True)
        else:
            echo(f"{checked.documents} documents in {files} files are valid", err=True)
    return 1 if errors else 0


def _validate_args(args: list[str]) -> tuple[list[str], bool] | None:
    """``validate PATH... [-o text|json]`` as (paths, as_json); None for anything else (typer's job)."""
    if not args or args[0] != "validate":
        return None
    paths, output, rest = [], "text", iter(args[1:])
    for arg in rest:
        if arg in ("-o", "--output"):
            output = next(rest, "")
        elif arg.startswith("--output="):
            output = arg.partition("=")[2]
        elif arg.startswith("-o") and len(arg) > 2:
            output = arg[2:]
        elif arg.startswith("-"):
            return None  # --help, --, a typo: typer answers
        else:
            paths.append(arg)
        if output not in ("text", "json"):
            return None
    return (paths, output == "json") if paths else None


def _guarded(command, *args) -> int:
    """As ``app.run`` does for typer's commands: one line and exit code 1, never a traceback."""
    from .output import error

    try:
        return command(*args)
    except KeyboardInterrupt:
        error("interrupted")
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:
        error(f"{type(exc).__name__}: {exc}")
        return 1


def __getattr__(name: str):
    if name == "app":
        from .app import app

        return app
    raise AttributeError(name)
