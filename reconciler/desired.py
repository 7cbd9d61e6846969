"""The desired state: files and folders → the final run documents, every error positioned.

``load_desired(paths, template=…, sets=…)`` is what ``astra validate``, ``astra template render``,
``plan`` and ``apply`` call. For each document of each file:

0. a template (``reconciler.template_files.is_template``: a file in a ``templates/`` folder, or a
   document with ``parameters``) is no run: it is checked against the template schema and by
   rendering it with its defaults (a required parameter without one takes a stand-in of its
   type, and what depends on a stand-in is not judged), and gives no run;
1. a run that names no template (and no ``--template``) is validated whole, as it is;
2. otherwise the run spec is validated as a partial spec (nulls allowed, ``spec`` optional); the
   template is named by the file's ``template.name`` or ``--template`` (both, and different: an
   error), its parameters by ``template.parameters`` and ``--set`` (both, and different: an
   error); the template is found (from the nearest ``templates/`` upward from the file:
   ``reconciler.template_files.search_folders``), loaded, its parameters type-checked, its spec rendered and
   merged under the run spec (``reconciler.templates.merge``);
3. the result (``metadata``, ``spec``; ``template`` dropped) is validated whole with
   ``validate_data``, and each error is placed where its value came from, the template or the
   run spec, through the origin map (final path → ``Origin``): the longest prefix of the error's
   path that has an origin; a missing required field points at the run spec's nearest existing
   parent.

Only loading reads files (the spec layer's ``load_file``, and templates found on the search
path); the rest is pure. jinja2 is imported only when a document uses a template.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .runspec.errors import ErrorType, FieldError
from .runspec.lint import lint
from .runspec.loading import Document, load_file
from .runspec.paths import FieldPath
from .runspec.validate import find_files, published_schema, validate_data
from .runspec.vocabulary import same
from .template_files import TEMPLATES_FOLDER, is_template, search_folders

if TYPE_CHECKING:
    from .templates import Origin, Template, TemplateLibrary

__all__ = [
    "Desired",
    "DesiredRun",
    "canonical",
    "explain",
    "load_desired",
    "to_json",
    "to_yaml",
]

_ROOT = FieldPath.root()
_TEMPLATE = _ROOT.child("template")


@dataclass
class DesiredRun:
    """One final run document, and where each of its values came from."""

    document: Document  # the run spec as loaded
    data: dict[str, Any]  # metadata and spec: what validate, plan and apply see
    template: Template | None = None
    origins: dict[FieldPath, Origin] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str | None:
        meta = self.data.get("metadata")
        return meta.get("name") if isinstance(meta, dict) else None

    def origin(self, path: FieldPath) -> Origin:
        """Where the value at ``path`` came from: the longest prefix of it that has an origin."""
        from .templates import Origin

        steps = path.steps
        for n in range(len(steps), -1, -1):
            found = self.origins.get(FieldPath(steps[:n]))
            if found is not None:
                for step in steps[n:]:
                    found = found.child(step)
                return found
        return Origin(self.document.source, self.document.index, path)

    def position(self, error: FieldError) -> FieldError:
        """``error`` (about the final document) placed in the file and line its value came from."""
        if not self.origins:
            return self.document.source.position(error, self.document.index)
        if error.type is ErrorType.required:  # nothing to point at: where to add it, in the run spec
            line, column = self.document.source.locate(self.document.index, error.path, key=True)
            return error.at(self.document.source.name, line, column)
        on_key = bool(error.extra.get("key")) or error.type not in (
            ErrorType.invalid,
            ErrorType.not_supported,
        )
        origin = self.origin(error.path)
        if origin.parameter is not None and origin.source is not None:
            via = (
                f" (parameter '{origin.parameter}' of template '{self.template.name}')"
                if self.template
                else ""
            )
            error = FieldError(error.type, error.path, error.message + via, extra=error.extra)
        return origin.error(error, key=on_key and origin.via is None)


@dataclass
class Desired:
    """Everything ``load_desired`` found: the valid runs, every document, every problem."""

    runs: list[DesiredRun]
    documents: list[Document]
    errors: list[FieldError]
    files: list[str]
    #: the valid runs' warnings (``reconciler.runspec.lint``), placed; only when asked for, and
    #: only of files without errors (those come first)
    warnings: list[FieldError] = field(default_factory=list)


def load_desired(
    paths: Iterable[str | os.PathLike[str]],
    *,
    template: str | None = None,
    sets: Sequence[str] = (),
    library: TemplateLibrary | None = None,
    contents: Mapping[str, bytes] | None = None,
    warnings: bool = False,
    checked: bool = False,
    listed: bool = False,
) -> Desired:
    """Load files and folders, apply templates, validate: the final runs and every error.

    ``contents``: the bytes of files the caller read already (a cold load hashed them), by name.
    ``checked``: those bytes were validated by a load already, and the caller holds the digest
    of each run that load gave (``load.reread``, which refuses any other): they are not
    validated again.
    ``warnings``: also the warnings (``lint``) of each valid run of a file without errors, placed
    in its file (a plan does not ask: placing them composes the documents' YAML nodes).
    ``listed``: ``paths`` are files ``find_files`` gave already (a load's shares): not looked at
    again."""
    files, errors = ([os.fspath(p) for p in paths], []) if listed else find_files(paths)
    given: dict[str, tuple[Any, Origin]] = {}
    if sets:
        from .templates import parse_sets

        given, set_errors = parse_sets(sets)
        errors += set_errors
    state = _State(template, given, library, bool(errors), checked)
    runs: list[DesiredRun] = []
    documents: list[Document] = []
    pending: list[tuple[DesiredRun, list[FieldError]]] = []
    for path in files:
        docs, load_errors = load_file(path, data=contents.get(path) if contents else None)
        errors += load_errors
        documents += docs
        for doc in docs:
            run, doc_errors = state.resolve(doc)
            errors += doc_errors
            if run is not None and not doc_errors:
                runs.append(run)
                if warnings:
                    found = lint(run.data)
                    if found:
                        pending.append((run, found))
    if sets and not state.used_template and not errors:
        text = "--set gives template parameters, but no document uses a template: add --template NAME"
        errors.append(FieldError(ErrorType.invalid, _TEMPLATE, text, "<command line>"))
    unique = {(e.file, e.line, e.column, e.path, e.message): e for e in errors}
    errors = sorted(unique.values(), key=lambda e: e.sort_key())
    failing = {e.file for e in errors}
    warned = [r.position(w) for r, found in pending if r.document.source.name not in failing for w in found]
    return Desired(runs, documents, errors, files, sorted(warned, key=lambda e: e.sort_key()))


class _State:
    """What one ``load_desired`` call shares between documents: flags, templates loaded."""

    def __init__(
        self,
        template: str | None,
        given: dict,
        library: TemplateLibrary | None,
        flags_bad: bool,
        checked: bool = False,
    ):
        self.template = template
        self.given = given
        self.flags_bad = flags_bad
        #: the documents' validation (none for bytes a load validated already: ``load_desired``)
        self.validate: Callable[[Any], list[FieldError]] = (lambda _data: []) if checked else validate_data
        self._library = library
        self._libraries: dict[tuple[Path, ...], TemplateLibrary] = {}
        self.used_template = False
        self._reported: set[str] = set()

    def library(self, file: str) -> TemplateLibrary:
        """The templates of ``file``: the library given, else one per set of search folders."""
        if self._library is not None:
            return self._library
        folders = search_folders(start=file)
        key = tuple(f.resolve() for f in folders)
        if key not in self._libraries:
            from .templates import TemplateLibrary

            self._libraries[key] = TemplateLibrary(folders)
        return self._libraries[key]

    def resolve(self, doc: Document) -> tuple[DesiredRun | None, list[FieldError]]:
        data = doc.data
        if is_template(doc.source.name, data):
            return None, check_template(doc)
        named = data.get("template")
        if named is None and not self.template and "template" not in data:
            errors = [doc.source.position(e, doc.index) for e in self.validate(data)]
            return (None if errors else DesiredRun(doc, data)), errors
        self.used_template = True
        return self._templated(doc)

    def _templated(self, doc: Document) -> tuple[DesiredRun | None, list[FieldError]]:
        """A run that names a template (in its file or by ``--template``): its parameters
        gathered, the template found, rendered and merged under the run's own ``spec``."""
        from .templates import Origin, merge, render, resolve_parameters

        data = doc.data
        source, index = doc.source, doc.index
        here = Origin(source, index, _ROOT)
        partial = data if "template" in data else {**data, "template": {"name": self.template or "-"}}
        errors = [source.position(e, index) for e in self.validate(partial)]
        if errors or self.flags_bad:
            return None, errors
        ref = data.get("template") or {}
        given_name = ref.get("name")
        name: str | None = given_name if isinstance(given_name, str) else None
        if name and self.template and name != self.template:
            text = f"this run uses template '{name}' but --template says '{self.template}': give one of them"
            at = here.child("template").child("name")
            return None, [at.error(FieldError.invalid(_TEMPLATE.child("name"), text))]
        name = name or self.template or ""  # one of them is there: validate_data saw to it
        given, errors = self._parameters(ref, here)
        if errors:
            return None, errors
        template, errors = self._template(name, source.name, here if ref.get("name") else None)
        if template is None:
            return None, errors
        missing_at = (
            here.child("template").child("parameters")
            if "template" in data
            else Origin.command_line(f"--template {name}")
        )
        values, value_origins, errors = resolve_parameters(template, given, missing_at)
        if errors:
            return None, errors
        rendered, origins, errors = render(template, values, value_origins)
        if errors or rendered is None:
            return None, errors
        final: dict[str, Any] = {k: v for k, v in data.items() if k not in ("template", "spec")}
        run_spec = data.get("spec") if isinstance(data.get("spec"), dict) else {}
        final["spec"] = merge(rendered, run_spec)
        final = canonical(final)
        run = DesiredRun(doc, final, template, _origins(final, run_spec, origins, doc))
        errors = [run.position(e) for e in self.validate(final)]
        return (None if errors else run), errors

    def _parameters(
        self, ref: dict[str, Any], here: Origin
    ) -> tuple[dict[str, tuple[Any, Origin]], list[FieldError]]:
        """The template's parameters given to this run, each with where it was given: the file's
        ``template.parameters`` and the command line's ``--set``; the two may not disagree."""
        from_file = ref.get("parameters") or {}
        given: dict[str, tuple[Any, Origin]] = {
            k: (v, here.child("template").child("parameters").child(k)) for k, v in from_file.items()
        }
        errors: list[FieldError] = []
        for k, (value, origin) in self.given.items():
            if k in from_file and not same(from_file[k], value):
                text = (
                    f"{origin.note} disagrees with this run's {k}: {json.dumps(from_file[k])}: "
                    "give the value in one place"
                )
                path = _TEMPLATE.child("parameters", k)
                errors.append(given[k][1].error(FieldError.invalid(path, text)))
            given[k] = (value, origin)
        return given, errors

    def _template(
        self, name: str, file: str, here: Origin | None
    ) -> tuple[Template | None, list[FieldError]]:
        """The template ``name`` from the library, or the errors that say why not: where the run
        names it (``here``, or ``--template`` when the name came from the command line). A
        template with problems has them said once; the other runs that use it point there."""
        from .templates import Origin

        template, template_errors, missing = self.library(file).get(name)
        if template is not None:
            return template, []
        at = here.child("template").child("name") if here is not None else Origin.command_line("--template")
        if missing:
            return None, [at.error(FieldError.not_supported(_TEMPLATE.child("name"), missing))]
        if name not in self._reported:
            self._reported.add(name)
            return None, template_errors
        text = f"template '{name}' has problems: see {template_errors[0].file}"
        return None, [at.error(FieldError.invalid(_TEMPLATE.child("name"), text))]


#: What a required parameter without a default stands for while its template is checked alone.
_STAND_INS: dict[str, Any] = {
    "string": "x",
    "integer": 1,
    "number": 1,
    "boolean": False,
    "list": [],
    "map": {},
}


def check_template(doc: Document) -> list[FieldError]:
    """A template's problems: its schema and parameters, its expressions, and its spec rendered
    with its defaults, as a partial run spec. A required parameter without a default takes a
    stand-in of its type; a problem of a value made from a stand-in is not reported, nor a rule
    between two fields (the run that uses the template gives the real values)."""
    from .runspec.rules import check_rules
    from .templates import merge, render, resolve_parameters
    from .templates.library import misnamed, template_from_document

    template, errors = template_from_document(doc)
    if template is None:
        return errors
    file = Path(doc.source.name)
    if file.parent.name == TEMPLATES_FOLDER and misnamed(template, file):
        return misnamed(template, file)  # found by its file's name: under this one, never
    here = template.origin(_ROOT)
    stand_ins = {
        k: (_STAND_INS[p.type], here)
        for k, p in template.parameters.items()
        if p.required and p.default is None
    }
    values, value_origins, errors = resolve_parameters(template, stand_ins, here)
    if errors:
        return errors
    rendered, origins, errors = render(template, values, value_origins)
    if errors or rendered is None:
        return errors
    name = template.name if isinstance(template.name, str) else "template"
    final = {"metadata": {"name": name}, "template": {"name": name}, "spec": merge(rendered, {})}
    run = DesiredRun(doc, final, template, _origins(final, {}, origins, doc))
    problems = validate_data(final)
    if stand_ins:
        rules = {(e.path, e.message) for e in check_rules(final, partial=True)}
        problems = [e for e in problems if (e.path, e.message) not in rules]
    return [
        run.position(e)
        for e in problems
        if e.path.steps[:1] == ("spec",) and run.origin(e.path).parameter not in stand_ins
    ]


def _exists(value: Any, steps: tuple[str | int, ...]) -> bool:
    for step in steps:
        if isinstance(value, dict) and isinstance(step, str):
            value = value.get(step)
            if value is None:
                return False
        elif isinstance(value, list) and isinstance(step, int) and 0 <= step < len(value):
            value = value[step]
        else:
            return False
    return True


def _origins(
    final: dict[str, Any], run_spec: Any, template_origins: dict[FieldPath, Origin], doc: Document
) -> dict[FieldPath, Origin]:
    """Every path of the final document → where its value came from (run spec wins)."""
    from .templates import Origin

    out: dict[FieldPath, Origin] = {}

    def walk(value: Any, path: FieldPath) -> None:
        steps = path.steps
        if not steps or steps[0] != "spec" or _exists(run_spec, steps[1:]):
            out[path] = Origin(doc.source, doc.index, path)
        else:
            out[path] = template_origins.get(path) or Origin(doc.source, doc.index, path)
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, path.key(k))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, path.index(i))

    walk(final, _ROOT)
    return out


# ---- output: the model's field order, YAML, JSON, explain --------------------------------------


@cache
def _definitions() -> dict[str, Any]:
    return published_schema("run").get("definitions", {})


@cache
def _root() -> dict[str, Any]:
    """The run schema with ``spec`` as the whole Spec (the schema itself chooses it by if/then)."""
    root = published_schema("run")
    return {**root, "properties": {**root["properties"], "spec": {"$ref": "#/definitions/Spec"}}}


def _resolve(node: Any) -> list[dict[str, Any]]:
    """The schema objects a node stands for: itself, its ``$ref``, its ``allOf``/``anyOf`` parts."""
    if not isinstance(node, dict):
        return []
    out = [node]
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/definitions/"):
        out += _resolve(_definitions().get(ref.rpartition("/")[2]))
    for key in ("allOf", "anyOf"):
        for part in node.get(key, []):
            if isinstance(part, dict) and ("$ref" in part or "properties" in part):
                out += _resolve(part)
    return out


def canonical(value: Any, schema: Any = None) -> Any:
    """``value`` with map keys in the model's field order (maps without fields: sorted)."""
    if schema is None:
        schema = _root()
    parts = _resolve(schema)
    if isinstance(value, dict):
        order: dict[str, Any] = {}
        extra = None
        for part in parts:
            for k, sub in part.get("properties", {}).items():
                order.setdefault(k, sub)
            if isinstance(part.get("additionalProperties"), dict):
                extra = part["additionalProperties"]
        known = [k for k in order if k in value]
        rest = sorted(k for k in value if k not in order)
        return {k: canonical(value[k], order.get(k, extra)) for k in (*known, *rest)}
    if isinstance(value, list):
        items = next((p["items"] for p in parts if isinstance(p.get("items"), dict)), None)
        return [canonical(v, items) for v in value]
    return value


def to_yaml(docs: Sequence[dict[str, Any]]) -> str:
    """A YAML stream, one document per run, keys in the model's order."""
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]
    yaml.width = 100_000
    out = []
    for doc in docs:
        buffer = io.StringIO()
        yaml.dump(doc, buffer)
        out.append(buffer.getvalue())
    return "---\n".join(out)


def to_json(docs: Sequence[dict[str, Any]]) -> str:
    """A JSON list, one item per run (a list even for one run)."""
    return json.dumps(list(docs), indent=2, ensure_ascii=False) + "\n"


def explain(run: DesiredRun) -> list[dict[str, Any]]:
    """Each leaf value of the final document and where it came from, in document order."""
    rows: list[dict[str, Any]] = []

    def walk(value: Any, path: FieldPath) -> None:
        if isinstance(value, dict) and value:
            for k, v in value.items():
                walk(v, path.key(k))
            return
        if isinstance(value, list) and value:
            for i, v in enumerate(value):
                walk(v, path.index(i))
            return
        origin = run.origin(path)
        file, line, column = origin.position()
        row: dict[str, Any] = {
            "path": str(path),
            "value": value,
            "file": file,
            "line": line,
            "column": column,
        }
        if origin.note:
            row["from"] = origin.note
        if origin.parameter is not None:
            row["parameter"] = origin.parameter
        if origin.via is not None:
            row["via"] = origin.via.where()
        rows.append(row)

    walk(run.data, _ROOT)
    return rows
