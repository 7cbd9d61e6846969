"""Field errors: what is wrong, where, and how to fix it.

Every validator returns ``list[FieldError]`` and gathers every problem instead of stopping at
the first. A ``FieldError`` is ``(type, path, message)`` plus, once a document's text is known,
the file, line and column of the offending key or value. The words come from
``reconciler.runspec.messages``; tests match on ``(type, path)``.

    SpecError                     base of the spec layer's exceptions
    └── InvalidSpec               carries a list of FieldErrors (the API's 422, the CLI's exit 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from .paths import FieldPath

__all__ = ["ErrorType", "FieldError", "InvalidSpec", "SpecError"]


class ErrorType(StrEnum):
    required = "required"
    invalid = "invalid"
    not_supported = "not_supported"
    forbidden = "forbidden"
    duplicate = "duplicate"
    unknown = "unknown"
    too_long = "too_long"
    syntax = "syntax"
    file = "file"
    #: not an error: a run that is valid but likely not what was meant (``reconciler.runspec.lint``)
    warning = "warning"


@dataclass(frozen=True, slots=True)
class FieldError:
    type: ErrorType
    path: FieldPath
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    extra: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    @classmethod
    def required(cls, path: FieldPath, message: str) -> FieldError:
        return cls(ErrorType.required, path, message)

    @classmethod
    def invalid(cls, path: FieldPath, message: str) -> FieldError:
        return cls(ErrorType.invalid, path, message)

    @classmethod
    def not_supported(cls, path: FieldPath, message: str) -> FieldError:
        return cls(ErrorType.not_supported, path, message)

    @classmethod
    def forbidden(cls, path: FieldPath, message: str) -> FieldError:
        return cls(ErrorType.forbidden, path, message)

    @classmethod
    def duplicate(cls, path: FieldPath, message: str) -> FieldError:
        return cls(ErrorType.duplicate, path, message)

    @classmethod
    def unknown(cls, path: FieldPath, message: str) -> FieldError:
        return cls(ErrorType.unknown, path, message)

    def at(self, file: str | None, line: int | None, column: int | None) -> FieldError:
        # not dataclasses.replace: a valid run's warnings are placed one by one, and it is slow
        return FieldError(self.type, self.path, self.message, file, line, column, self.extra)

    def format(self) -> str:
        """``FILE:LINE:COLUMN: PATH: MESSAGE`` (a warning's: ``… PATH: warning: MESSAGE``); parts
        that are not known are left out."""
        where = ":".join(str(p) for p in (self.file, self.line, self.column) if p is not None)
        path = str(self.path)
        message = f"warning: {self.message}" if self.type is ErrorType.warning else self.message
        parts = [p for p in (where, path, message) if p]
        return ": ".join(parts)

    def to_json(self) -> dict:
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "path": str(self.path),
            "message": self.message,
        }

    def sort_key(self) -> tuple:
        return (self.file or "", self.line or 0, self.column or 0, str(self.path), self.message)


class SpecError(Exception):
    """Base of the spec layer's exceptions."""


class InvalidSpec(SpecError):
    def __init__(self, errors: list[FieldError]):
        self.errors = errors
        super().__init__("\n".join(e.format() for e in errors))
