"""The spec DSL: models, quantities, the exact messages, loading with positions, the schema.

The root of the package: it imports no other part of astra. Names are loaded on first use, so
that ``astra validate`` does not pay for pydantic, which only the models need.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = [
    "Document",
    "ErrorType",
    "FieldError",
    "FieldPath",
    "InvalidSpec",
    "Run",
    "Source",
    "load_file",
    "load_text",
    "parse_run",
    "run_schema",
    "template_schema",
    "validate_data",
    "validate_files",
]

_WHERE = {
    "Document": "loading",
    "Source": "loading",
    "load_file": "loading",
    "load_text": "loading",
    "ErrorType": "errors",
    "FieldError": "errors",
    "InvalidSpec": "errors",
    "FieldPath": "paths",
    "Run": "models",
    "parse_run": "parse",
    "run_schema": "schema",
    "template_schema": "schema",
    "validate_data": "validate",
    "validate_files": "validate",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(name)
