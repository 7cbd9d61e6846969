"""Printing for the CLI: one clear line per error, JSON and YAML for machines."""

from __future__ import annotations

import json
import sys
from typing import Any

__all__ = ["echo", "error", "os_error_words", "print_json", "version_line"]


def echo(text: str = "", *, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")


def error(text: str) -> None:
    """An error for a person: ``astra: error: …`` on stderr."""
    sys.stderr.write(f"astra: error: {text}\n")


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def os_error_words(exc: OSError) -> str:
    """An operating system's error as a person reads it: what it was about, and what went wrong."""
    what = exc.strerror or str(exc)
    if exc.filename is None:
        return what
    return f"{exc.filename}: {what}" + (f" (and {exc.filename2})" if exc.filename2 is not None else "")


def version_line() -> str:
    """``astra 0.1.0``: the installed distribution's version (the package's own when not installed)."""
    from importlib import metadata

    try:
        version = metadata.version("astra-reconciler")
    except metadata.PackageNotFoundError:
        from .. import __version__ as version
    return f"astra {version}"
