"""Where each value of a rendered template came from: the file, document and path, or the command line.

Owns: ``Origin`` (a document of a file and a path in it, or ``--template``/``--set`` on the command
line; for a value made by a parameter, the template string that made it and the parameter), the
file, line and column it points at, placing a ``FieldError`` there, finding a value's YAML node
(``yaml_node``), and the paths of a template document (``ROOT``, ``PARAMETERS``, ``SPEC``).

Must not touch: jinja2, rendering, merging; files are read through ``FileText`` only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..runspec.errors import FieldError
from ..runspec.loading import FileText
from ..runspec.paths import FieldPath

__all__ = ["COMMAND_LINE", "PARAMETERS", "ROOT", "SPEC", "Origin", "yaml_node"]

COMMAND_LINE = "<command line>"
ROOT = FieldPath.root()
PARAMETERS = ROOT.child("parameters")
SPEC = ROOT.child("spec")


@dataclass(frozen=True)
class Origin:
    """Where a value came from: a document of a file and a path in it, or the command line.

    ``via`` is the template string whose expression produced the value (``"{{ gpus }}"``) when
    the value itself comes from a parameter; ``parameter`` names that parameter.
    """

    source: FileText | None
    index: int = 0
    path: FieldPath = ROOT
    note: str = ""
    via: Origin | None = None
    parameter: str | None = None

    @classmethod
    def command_line(cls, note: str) -> Origin:
        return cls(None, 0, ROOT, note)

    def child(self, step: str | int) -> Origin:
        if self.source is None:
            return self
        path = self.path.index(step) if isinstance(step, int) else self.path.key(step)
        return replace(self, path=path)

    @property
    def file(self) -> str:
        return self.source.name if self.source is not None else COMMAND_LINE

    def position(self, *, key: bool = False) -> tuple[str, int | None, int | None]:
        if self.source is None:
            return COMMAND_LINE, None, None
        line, column = self.source.locate(self.index, self.path, key=key)
        return self.source.name, line, column

    def where(self) -> str:
        file, line, column = self.position()
        if line is None:
            return f"{file} ({self.note})" if self.note else file
        return f"{file}:{line}:{column}"

    def error(self, error: FieldError, *, key: bool = False) -> FieldError:
        """``error`` placed here."""
        file, line, column = self.position(key=key)
        if self.source is None and self.note:
            error = replace(error, message=f"{error.message} (from {self.note})")
        return error.at(file, line, column)


def yaml_node(source: FileText, index: int, path: FieldPath) -> Any:
    from ruamel.yaml.nodes import MappingNode, SequenceNode

    node, _ = source.node(index)
    for step in path.steps:
        if isinstance(node, MappingNode) and isinstance(step, str):
            node = next((v for k, v in node.value if str(k.value) == step), None)
        elif isinstance(node, SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value):
            node = node.value[step]
        else:
            return None
        if node is None:
            return None
    return node
