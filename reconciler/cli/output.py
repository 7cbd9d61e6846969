"""Printing for the CLI: one clear line per error, JSON and YAML for machines."""

from __future__ import annotations

import json
import sys
from typing import Any

__all__ = ["echo", "error", "print_json"]


def echo(text: str = "", *, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")


def error(text: str) -> None:
    """An error for a person: ``astra: error: …`` on stderr."""
    sys.stderr.write(f"astra: error: {text}\n")


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
