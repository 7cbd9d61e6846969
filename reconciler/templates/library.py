"""The template library: finding templates by name and loading them, each once.

Owns: finding a template's file (``find_template``: the nearest ``templates/`` upward from the
spec file, then each folder of ``ASTRA_TEMPLATE_PATH``, then the templates shipped with astra;
the folders and the listing are ``reconciler.template_files``', kept apart so that a load that
only fingerprints the template files imports nothing of this package), loading one
(``load_template``, or ``template_from_document`` for a document read already: validated
against ``schema/template.schema.json``, parameters checked, every string compiled once, so a
broken template is reported when it is loaded, whoever uses it), ``Template``, and
``TemplateLibrary`` (templates by name, each found and loaded once; its problems reported once).

Must not touch: rendering, merging, a cluster, the terminal. It reads files; nothing else here does.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..runspec.errors import ErrorType, FieldError
from ..runspec.loading import Document, load_file
from ..runspec.paths import FieldPath
from ..runspec.validate import validate_data
from ..template_files import available, search_folders, shipped_folder
from .origins import PARAMETERS, ROOT, Origin
from .parameters import Parameter, type_error
from .sandbox import Piece, compile_template

__all__ = [
    "Template",
    "TemplateLibrary",
    "find_template",
    "load_template",
    "misnamed",
    "template_from_document",
]


@dataclass
class Template:
    name: str
    description: str
    parameters: dict[str, Parameter]
    spec: dict[str, Any]
    document: Document
    pieces: dict[FieldPath, Piece] = field(default_factory=dict, repr=False)

    @property
    def file(self) -> str:
        return self.document.source.name

    def origin(self, path: FieldPath) -> Origin:
        return Origin(self.document.source, self.document.index, path)


def find_template(name: str, folders: list[Path]) -> tuple[Path | None, str]:
    """The file of template ``name``, or why there is none (the folders searched, what is there)."""
    found = available(folders)
    if name in found:
        return found[name], ""
    searched = ", ".join(_folder_words(f) for f in folders)
    text = f"no template named '{name}' (searched {searched})"
    close = difflib.get_close_matches(name, list(found), n=1, cutoff=0.6)
    if close:
        text += f"; did you mean '{close[0]}'?"
    text += f"; templates found: {', '.join(found) or 'none'}"
    return None, text


def _folder_words(folder: Path) -> str:
    where = f"{folder}/" if not folder.is_absolute() else str(folder)
    if folder == Path("templates"):
        where = "./templates/"
    shipped = shipped_folder()
    if shipped is not None and folder.resolve() == shipped:
        where += " (shipped with astra)"
    return where if folder.is_dir() else f"{where} (no such folder)"


def load_template(path: str | os.PathLike[str]) -> tuple[Template | None, list[FieldError]]:
    """Read, validate and compile one template file. The template is ``None`` if it is unusable."""
    docs, errors = load_file(path)
    if errors:
        return None, errors
    if len(docs) != 1:
        where = docs[1].source.locate(docs[1].index, ROOT) if len(docs) > 1 else (1, 1)
        return None, [
            FieldError(
                ErrorType.file,
                ROOT,
                f"a template file holds one template, not {len(docs)}",
                os.fspath(path),
                *where,
            )
        ]
    return template_from_document(docs[0])


def template_from_document(doc: Document) -> tuple[Template | None, list[FieldError]]:
    """Validate and compile one template document. The template is ``None`` if it is unusable."""
    errors = [doc.source.position(e, doc.index) for e in validate_data(doc.data, "template")]
    if errors:
        return None, errors
    data = doc.data
    meta = data["metadata"]
    template = Template(
        name=meta["name"],
        description=meta.get("description", ""),
        parameters={},
        spec=data.get("spec") or {},
        document=doc,
    )
    for name, p in (data.get("parameters") or {}).items():
        parameter = Parameter(
            name, p["type"], p.get("default"), p.get("description", ""), bool(p.get("required", False))
        )
        here = template.origin(PARAMETERS.key(name))
        if parameter.default is not None:
            wrong = type_error(parameter, parameter.default)
            if wrong:
                errors.append(here.child("default").error(FieldError.invalid(PARAMETERS.key(name), wrong)))
            if parameter.required:
                text = "a required parameter has no default: remove default or required"
                errors.append(here.child("required").error(FieldError.invalid(PARAMETERS.key(name), text)))
        template.parameters[name] = parameter
    errors += compile_template(template)
    return (None if errors else template), errors


class TemplateLibrary:
    """Templates by name, each found and loaded once; its problems are reported once."""

    def __init__(self, folders: list[Path] | None = None, start: str | os.PathLike[str] | None = None):
        """``folders`` searched in order; by default those of a spec file ``start`` (or of the
        working folder): ``reconciler.template_files.search_folders``."""
        self.folders = search_folders(start=start) if folders is None else folders
        self._loaded: dict[str, tuple[Template | None, list[FieldError], str]] = {}

    def names(self) -> dict[str, Path]:
        return available(self.folders)

    def get(self, name: str) -> tuple[Template | None, list[FieldError], str]:
        """``(template, its file's problems, why it was not found)``."""
        if name not in self._loaded:
            path, missing = find_template(name, self.folders)
            if path is None:
                self._loaded[name] = (None, [], missing)
            else:
                template, errors = load_template(_display(path))
                wrong = misnamed(template, path) if template is not None else []
                if wrong:
                    template, errors = None, wrong
                self._loaded[name] = (template, errors, "")
        return self._loaded[name]


def misnamed(template: Template, path: Path) -> list[FieldError]:
    """The error of a template whose name is not its file's (it is found by its file's name)."""
    if template.name == path.stem:
        return []
    text = (
        f"this template is named '{template.name}' but its file '{path.name}': "
        f"the file of template '{template.name}' is {template.name}{path.suffix}"
    )
    at = template.origin(ROOT.child("metadata", "name"))
    return [at.error(FieldError.invalid(ROOT.child("metadata", "name"), text))]


def _display(path: Path) -> str:
    try:
        return os.path.relpath(path) if not path.is_absolute() else str(path)
    except ValueError:  # another drive
        return str(path)
