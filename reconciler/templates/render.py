"""Rendering a loaded template: its spec with every expression evaluated, and every value's origin.

Owns: walking a template's spec with the parameters' values (one budget for the whole walk),
leaving out a field that renders to null, and the origin map (a value made by a parameter
points at where the parameter's value was given, by way of the template string that used it).

Must not touch: files, the sandbox's rules (``sandbox``), merging (``merge``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..runspec.errors import ErrorType, FieldError
from ..runspec.paths import FieldPath
from .budget import Budget, OverBudget
from .origins import SPEC, Origin
from .sandbox import Failed, Refused, evaluate

if TYPE_CHECKING:
    from .library import Template

__all__ = ["render"]


def render(
    template: Template,
    values: Mapping[str, Any],
    origins: Mapping[str, Origin],
    *,
    budget: Budget | None = None,
) -> tuple[dict[str, Any] | None, dict[FieldPath, Origin], list[FieldError]]:
    """The template's spec with every expression evaluated, and the origin of every value in it.

    ``values`` must have passed ``resolve_parameters``. Paths in the origin map start at
    ``spec``. A field that renders to null is left out. The rendering spends one ``Budget`` (a
    new one unless given): a value over a limit is an error at that value, and a limit of the
    whole rendering (its time, its loops, its size) ends it there.
    """
    out_origins: dict[FieldPath, Origin] = {}
    errors: list[FieldError] = []
    values = dict(values)
    budget = Budget() if budget is None else budget

    def walk(value: Any, path: FieldPath, origin: Origin) -> Any:
        if isinstance(value, dict):
            out_origins[path] = origin
            out = {}
            for k, v in value.items():
                rendered = walk(v, path.key(k), origin.child(k))
                if rendered is not None:
                    out[k] = rendered
            return out
        if isinstance(value, list):
            out_origins[path] = origin
            return [walk(v, path.index(i), origin.child(i)) for i, v in enumerate(value)]
        piece = template.pieces.get(path)
        if piece is None:
            out_origins[path] = origin
            return value
        if budget.spent is not None:
            return None  # the rendering ended at a limit, reported where it was reached
        try:
            result = evaluate(piece, values, budget)
        except OverBudget as exc:
            errors.append(origin.error(FieldError(ErrorType.too_long, path, str(exc))))
            return None
        except Refused as exc:
            errors.append(origin.error(FieldError(ErrorType.forbidden, path, str(exc))))
            return None
        except Failed as exc:
            errors.append(origin.error(FieldError.invalid(path, str(exc))))
            return None
        if piece.name is not None and piece.name in origins:
            where = replace(origins[piece.name], via=origin, parameter=piece.name)
        else:
            where = origin
        _mark(result, path, where, out_origins)
        return result

    spec = walk(template.spec, SPEC, template.origin(SPEC))
    return (None if errors else spec), out_origins, errors


def _mark(value: Any, path: FieldPath, origin: Origin, out: dict[FieldPath, Origin]) -> None:
    out[path] = origin
    if isinstance(value, dict):
        for k, v in value.items():
            _mark(v, path.key(k), origin.child(k), out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _mark(v, path.index(i), origin.child(i), out)
