"""Warnings: runs that are valid but likely not what was meant (the seeds' troubleshooting table).

``lint(doc) -> list[FieldError]`` (each of type ``warning``, sorted by path) for a valid run
document:

* an array whose command, args or env read ``SLURM_ARRAY_TASK_ID``, which an array's copies never
  get (``messages.LINT_SLURM_ARRAY_TASK_ID``);
* a worker template without ``time_limit_seconds`` (but a Service's, which runs until deleted):
  such a run cannot backfill (``messages.LINT_NO_TIME_LIMIT``);
* a ``command`` of one string with spaces (``sh -c 'echo hi'``), which runs a program of that whole
  name, with no arguments (``messages.LINT_ONE_STRING_COMMAND``).

``astra validate`` and ``astra plan`` print them after the errors and exit 0 (``--strict``: as
errors); the API answers them beside a created or updated run (``warnings``). The words are
``messages``'. Pure: a document in, warnings out.
"""

from __future__ import annotations

from typing import Any

from . import messages as msg
from .errors import ErrorType, FieldError
from .paths import FieldPath

__all__ = ["lint"]

_ROOT = FieldPath.root()
_TEMPLATE = _ROOT.child("spec", "task_template")


def _warning(path: FieldPath, message: str) -> FieldError:
    return FieldError(ErrorType.warning, path, message)


def _path(index: int | None) -> FieldPath:
    """Where a worker template is: ``task_template`` (``None``), or group ``index``'s."""
    if index is None:
        return _TEMPLATE
    return _ROOT.child("spec", "task_groups").index(index).child("task_template")


def _mentions(value: Any, name: str) -> bool:
    """Whether a string value in ``value`` mentions ``name`` (before any path is built)."""
    if isinstance(value, str):
        return name in value
    if isinstance(value, list):
        return any(_mentions(v, name) for v in value)
    if isinstance(value, dict):
        return any(_mentions(v, name) for v in value.values())
    return False


def _reads(value: Any, path: FieldPath, name: str) -> list[FieldPath]:
    """The paths under ``path`` whose string values mention ``name``."""
    if isinstance(value, str):
        return [path] if name in value else []
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _reads(v, path.index(i), name)]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _reads(v, path.key(str(k)), name)]
    return []


def lint(doc: Any) -> list[FieldError]:
    """The warnings of a valid run document (see the module docstring). Each worker template is
    read where it is (its path is built only for a warning: nearly every run has none)."""
    spec = doc.get("spec") if isinstance(doc, dict) else None
    if not isinstance(spec, dict):
        return []
    found: list[FieldError] = []
    service = spec.get("lifetime") == "Service"
    array = spec.get("array") is not None
    template = spec.get("task_template")
    if isinstance(template, dict):
        _lint_template(template, None, service, array, found)
    groups = spec.get("task_groups")
    if isinstance(groups, list):
        for i, group in enumerate(groups):
            template = group.get("task_template") if isinstance(group, dict) else None
            if isinstance(template, dict):
                _lint_template(template, i, service, array, found)
    return sorted(found, key=lambda e: str(e.path)) if len(found) > 1 else found


def _lint_template(
    template: dict[str, Any], index: int | None, service: bool, array: bool, found: list[FieldError]
) -> None:
    """The warnings of one worker template (``index``: its group's, ``None`` for ``task_template``)."""
    command = template.get("command")
    if isinstance(command, str) and " " in command.strip():
        found.append(_warning(_path(index).child("command"), msg.LINT_ONE_STRING_COMMAND))
    if not service and template.get("time_limit_seconds") is None:
        found.append(_warning(_path(index).child("time_limit_seconds"), msg.LINT_NO_TIME_LIMIT))
    if array:
        for field in ("command", "args", "env"):
            value = template.get(field)
            if not _mentions(value, "SLURM_ARRAY_TASK_ID"):
                continue
            for where in _reads(value, _path(index).child(field), "SLURM_ARRAY_TASK_ID"):
                found.append(_warning(where, msg.LINT_SLURM_ARRAY_TASK_ID))
