"""``astra validate``'s body, free of typer: called by typer's command (``reconciler.cli.app``)
and, with plain arguments, by ``reconciler.cli.main``, with the same ``ValidateOptions``.

Must not touch: anything but printing what ``reconciler.check`` found.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["validate_command"]


def validate_command(options: Any) -> int:
    """Check run specs against the published schema and rules, reporting every problem.

    Every problem of every document of every file is reported at once, one per line, as
    FILE:LINE:COLUMN: FIELD.PATH: MESSAGE. Exit 0 when all are valid, 1 otherwise. Warnings
    (FILE:LINE:COLUMN: FIELD.PATH: warning: MESSAGE: a run without a time limit, an array that
    reads SLURM_ARRAY_TASK_ID, a command of one string with spaces) follow on stderr and leave
    the exit code 0, unless --strict.

    Examples:

        astra validate examples/

        astra validate run.yaml -o json
    """
    # Its help (typer's and --help's by the plain route). Runs that name a template (or
    # --template, --set) are rendered and merged first: what is validated is the final run, as
    # plan and apply see it. Warnings (runspec.lint; of files without errors) are printed after
    # the errors, on stderr, and leave the exit code 0; --strict: they are errors.
    from dataclasses import replace

    from ..check import check
    from ..runspec.errors import ErrorType
    from .output import echo, print_json

    checked = check(options.paths, template=options.template, sets=options.sets)
    strict, as_json = options.strict, options.output == "json"
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
