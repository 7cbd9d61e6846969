"""A template's parameters: their types, ``--set`` on the command line, and each one's value.

Owns: the parameter types (``PARAMETER_TYPES``) and their words, ``Parameter``, whether a value
is of a parameter's type (``type_error``: a boolean is not a number), reading ``--set key=value``
flags (each value a YAML 1.2 scalar or flow value), and resolving every parameter of a template
to a value (given, else its default, else null) with where that value came from.

Must not touch: files (a template comes in loaded), jinja2, rendering.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..runspec import messages as msg
from ..runspec.errors import ErrorType, FieldError
from ..runspec.nesting import refused
from .origins import COMMAND_LINE, PARAMETERS, ROOT, Origin

if TYPE_CHECKING:
    from .library import Template

__all__ = ["PARAMETER_TYPES", "Parameter", "parse_sets", "resolve_parameters", "type_error"]

PARAMETER_TYPES = ("string", "integer", "number", "boolean", "list", "map")
_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "list": "a list",
    "map": "a map",
}


@dataclass(frozen=True)
class Parameter:
    name: str
    type: str
    default: Any = None
    description: str = ""
    required: bool = False

    @property
    def kind(self) -> str:
        """``an integer``, ``a string``: the type in words."""
        return _TYPE_WORDS[self.type]


def type_error(parameter: Parameter, value: Any) -> str | None:
    """Why ``value`` is not of the parameter's type, or ``None``. A boolean is not a number."""
    t = parameter.type
    ok = {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
        "list": isinstance(value, list),
        "map": isinstance(value, dict),
    }[t]
    if ok:
        return None
    text = f"parameter '{parameter.name}' must be {parameter.kind}, not {msg.describe(value)}"
    if t == "string" and isinstance(value, int | float | bool):
        text += " (quote it)"
    if t == "integer" and isinstance(value, float) and value.is_integer():
        text += f" (write {int(value)})"
    return text


def parse_sets(items: Iterable[str]) -> tuple[dict[str, tuple[Any, Origin]], list[FieldError]]:
    """``--set key=value`` flags: each value read as a YAML 1.2 scalar or flow value."""
    import yaml_rs

    values: dict[str, tuple[Any, Origin]] = {}
    errors: list[FieldError] = []
    for item in items:
        key, eq, raw = item.partition("=")
        key = key.strip()
        origin = Origin.command_line(f"--set {item}")
        if not eq or not _NAME_PATTERN.match(key):
            text = f"--set {item}: give key=value, the key a parameter name (letters, digits, '_')"
            errors.append(FieldError(ErrorType.invalid, ROOT, text, COMMAND_LINE))
            continue
        path = ROOT.child("template", "parameters", key)
        deep = refused(raw, COMMAND_LINE)  # nesting deep enough to crash yaml-rs
        if deep is not None:
            said = (
                f"the value {deep.message}" if deep.type is ErrorType.invalid else f"{deep.message}; quote it"
            )
            text = f"--set {item}: {said}"
            errors.append(FieldError(ErrorType.invalid, path, text, COMMAND_LINE))
            continue
        try:
            value = yaml_rs.loads(raw) if raw.strip() else ""
        except Exception as exc:  # yaml-rs' own error type; its words, not a traceback
            reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else "not a YAML value"
            text = f"--set {item}: the value is not a YAML value ({reason}); quote it"
            errors.append(FieldError(ErrorType.invalid, path, text, COMMAND_LINE))
            continue
        if isinstance(value, list) and raw.lstrip().startswith("-"):
            value = raw  # "-c" is a string on the command line, not a one-item list
        if key in values and values[key][0] != value:
            text = f"--set {key} is given twice, with different values: give it once"
            errors.append(FieldError(ErrorType.duplicate, path, text, COMMAND_LINE))
            continue
        values[key] = (value, origin)
    return values, errors


def resolve_parameters(
    template: Template, given: Mapping[str, tuple[Any, Origin]], missing_at: Origin
) -> tuple[dict[str, Any], dict[str, Origin], list[FieldError]]:
    """Every parameter's value (given, else the default, else null) and where it came from.

    Refuses names the template does not have, values of the wrong type and required parameters
    that were not given; ``missing_at`` is where a missing parameter is reported.
    """
    values: dict[str, Any] = {}
    origins: dict[str, Origin] = {}
    errors: list[FieldError] = []
    names = list(template.parameters)
    for name, (value, origin) in given.items():
        path = ROOT.child("template", "parameters", name)
        if name not in template.parameters:
            text = f"template '{template.name}' has no parameter '{name}'"
            close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
            text += (
                f"; did you mean '{close[0]}'?"
                if close
                else f"; its parameters: {', '.join(names) or 'none'}"
            )
            errors.append(origin.error(FieldError.unknown(path, text), key=True))
            continue
        if value is None:
            continue  # null: not given
        wrong = type_error(template.parameters[name], value)
        if wrong:
            errors.append(origin.error(FieldError.invalid(path, wrong)))
            continue
        values[name], origins[name] = value, origin
    for name, p in template.parameters.items():
        if name in values or (name in given and given[name][0] is not None):
            continue
        if p.required:
            path = ROOT.child("template", "parameters", name)
            text = f"template '{template.name}' needs parameter '{name}' ({p.kind}"
            text += f": {p.description})" if p.description else ")"
            if missing_at.source is None:
                text += f": add --set {name}=VALUE"
            errors.append(missing_at.error(FieldError.required(path, text), key=True))
            continue
        values[name] = p.default
        at = PARAMETERS.key(name)
        origins[name] = template.origin(at.key("default") if p.default is not None else at)
    return values, origins, errors
