"""``--help`` of a command with a plain argv route (``cli/__init__.py``'s ``_PLAIN``), written by
click's help formatter from the command's options (``flags``) and its body's docstring: what
typer's command of the same options prints, without typer's import (a few hundred
milliseconds: typer imports pydantic; click alone is a tenth of that).

typer's words for an option are kept: its type in angle brackets (``<str>``, ``<path>``,
``<list[Path]>``, ``<int range>``, ``<a|b|c>`` for a choice), an argument's section before the
options, a required argument in braces in the usage line. ``tests/test_plain_help.py`` holds
the two routes' text equal for every command of the plain route.

Must not touch: what a command does (its body), typer's app.
"""

from __future__ import annotations

from typing import Any

from .flags import Flag, flags_of

__all__ = ["help_text"]

_TYPES = {"text": "str", "path": "path", "float": "float", "int": "int"}
_LISTED = {"text": "str", "path": "Path", "float": "float", "int": "int"}


def help_text(path: str, options: type, doc: str) -> str:
    """The help of the command ``path`` (``astra get runs``) of ``options``, ``doc`` its text."""
    import inspect

    import click

    fmt = click.HelpFormatter()
    declared = flags_of(options)
    arguments = [(name, f) for name, f in declared if not f.names]
    fmt.write_usage(path, " ".join(["[OPTIONS]", *(_usage(name, f) for name, f in arguments)]))
    text = inspect.cleandoc(doc).partition("\f")[0] if doc else ""
    if text:
        fmt.write_paragraph()
        with fmt.indentation():
            fmt.write_text(text)
    if arguments:
        with fmt.section("Arguments"):
            fmt.write_dl([(_argument(name, f), _extras(f.help, f, None)) for name, f in arguments])
    rows = [_option(f, default) for f, default in _defaults(options) if f.names]
    rows.append(("-h, --help", "Show this message and exit."))
    with fmt.section("Options"):
        fmt.write_dl(rows)
    return fmt.getvalue()


def _defaults(options: type) -> list[tuple[Flag, Any]]:
    from dataclasses import fields

    return [(f.metadata["flag"], f.default) for f in fields(options)]


def _usage(name: str, flag: Flag) -> str:
    """An argument in the usage line: ``{run}`` required, ``[names]...`` optional."""
    base = flag.metavar or name
    many = "..." if flag.kind == "args" else ""
    return f"{{{base}}}{many}" if _required(flag) else f"[{base}]{many}"


def _argument(name: str, flag: Flag) -> str:
    """An argument's row: ``paths... <list[Path]>``, ``run <str>``."""
    base = flag.metavar or (f"{name}..." if flag.kind == "args" else name)
    return f"{base} {_metavar(flag)}"


def _option(flag: Flag, default: Any) -> tuple[str, str]:
    names = ", ".join(sorted(flag.names, key=lambda n: not n.startswith("-") or n.startswith("--")))
    head = names if flag.kind == "flag" else f"{names} {_metavar(flag)}"
    shown = None if flag.kind in ("flag", "list") or default is None else default
    return head, _extras(flag.help, flag, shown)


def _metavar(flag: Flag) -> str:
    if flag.choices:
        return "<" + "|".join(flag.choices) + ">"
    if flag.kind in ("list", "args"):
        return f"<list[{_LISTED[flag.type]}]>"
    ranged = " range" if flag.minimum is not None else ""
    return f"<{_TYPES[flag.type]}{ranged}>"


def _extras(words: str, flag: Flag, default: Any) -> str:
    """The help and its bracket, in click's order: env var, default, range, required."""
    extra = []
    if flag.env:
        extra.append(f"env var: {flag.env}")
    if default is not None:
        extra.append(f"default: {default}")
    if flag.minimum is not None:
        extra.append(f"x>={flag.minimum}")
    if _required(flag):
        extra.append("required")
    return f"{words}  [{'; '.join(extra)}]" if extra else words


def _required(flag: Flag) -> bool:
    return flag.required or flag.kind == "arg"
