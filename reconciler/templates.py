"""Templates: reusable, partial run specs with typed parameters.

Owns finding templates (``./templates/``, then each folder of ``ASTRA_TEMPLATE_PATH``), loading
them (validated against ``schema/template.schema.json``; every string value compiled once, so a
broken template is reported when it is loaded, whoever uses it), type-checking parameter values,
rendering, and merging a rendered spec under a run spec. ``find_template``, ``available`` and
``load_template`` read files; everything else is pure. It must not touch a cluster or print.

Rendering is jinja2's ``SandboxedEnvironment`` with ``StrictUndefined``, applied to string values
only, never to the YAML text. A value that is exactly one expression (``"{{ gpus }}"``) is
evaluated natively and keeps its type; any other string with ``{{ }}`` or ``{% %}`` renders to a
string. Templates may use parameters, literals, the filters in ``FILTERS`` and jinja's tests:
no calls, no ``_``-attributes, no globals (``range``, ``cycler``, …), no macros, imports or
includes. What the sandbox refuses is reported with one fixed message that never names what the
expression touched.

Merge (``merge``): the template's rendered spec is the base and the run spec wins; maps merge
deeply, lists replace, an explicit ``null`` in the run spec removes the field. A value that
renders to ``null`` (a parameter with no default that was not given) leaves its field out.

No exception leaves this module for a problem in a file or a value: every problem is a
``FieldError`` carrying the file, line and column it comes from (``COMMAND_LINE`` for
``--template``/``--set``).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from .runspec import messages as msg
from .runspec.errors import ErrorType, FieldError
from .runspec.loading import Document, Source, load_file
from .runspec.paths import FieldPath
from .runspec.validate import validate_data
from .template_files import TEMPLATE_PATH_ENV, available, search_folders

__all__ = [
    "COMMAND_LINE",
    "FILTERS",
    "NOT_ALLOWED",
    "PARAMETER_TYPES",
    "TEMPLATE_PATH_ENV",
    "Origin",
    "Parameter",
    "Template",
    "TemplateLibrary",
    "available",
    "find_template",
    "load_template",
    "merge",
    "parse_sets",
    "render",
    "resolve_parameters",
    "search_folders",
    "type_error",
]

COMMAND_LINE = "<command line>"
PARAMETER_TYPES = ("string", "integer", "number", "boolean", "list", "map")
NOT_ALLOWED = (
    "this expression is not allowed in a template: templates may use parameters, literals and filters only"
)
#: The filters a template may use: none of them reaches outside its arguments.
FILTERS = (
    "abs",
    "capitalize",
    "d",
    "default",
    "dictsort",
    "first",
    "float",
    "int",
    "items",
    "join",
    "last",
    "length",
    "list",
    "lower",
    "max",
    "min",
    "replace",
    "reverse",
    "round",
    "sort",
    "string",
    "sum",
    "title",
    "tojson",
    "trim",
    "unique",
    "upper",
)
#: ``*`` and ``**`` are checked so that one expression cannot fill the memory.
MAX_RENDERED = 100_000
_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ROOT = FieldPath.root()
_PARAMETERS = _ROOT.child("parameters")
_SPEC = _ROOT.child("spec")
_MARKERS = ("{{", "{%", "{#")


# ---- where a value came from ------------------------------------------------------------------


@dataclass(frozen=True)
class Origin:
    """Where a value came from: a document of a file and a path in it, or the command line.

    ``via`` is the template string whose expression produced the value (``"{{ gpus }}"``) when
    the value itself comes from a parameter; ``parameter`` names that parameter.
    """

    source: Source | None
    index: int = 0
    path: FieldPath = _ROOT
    note: str = ""
    via: Origin | None = None
    parameter: str | None = None

    @classmethod
    def command_line(cls, note: str) -> Origin:
        return cls(None, 0, _ROOT, note)

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


# ---- templates --------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class _Piece:
    """One string value of a template's spec, compiled."""

    origin: Origin
    run: Callable[[dict[str, Any]], Any]
    native: bool  # one expression: keeps its type
    name: str | None  # the parameter, when the expression is just its name


@dataclass
class Template:
    name: str
    description: str
    parameters: dict[str, Parameter]
    spec: dict[str, Any]
    document: Document
    pieces: dict[FieldPath, _Piece] = field(default_factory=dict, repr=False)

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
    return where if folder.is_dir() else f"{where} (no such folder)"


def load_template(path: str | os.PathLike[str]) -> tuple[Template | None, list[FieldError]]:
    """Read, validate and compile one template file. The template is ``None`` if it is unusable."""
    docs, errors = load_file(path)
    if errors:
        return None, errors
    if len(docs) != 1:
        where = docs[1].source.locate(docs[1].index, _ROOT) if len(docs) > 1 else (1, 1)
        return None, [
            FieldError(
                ErrorType.file,
                _ROOT,
                f"a template file holds one template, not {len(docs)}",
                os.fspath(path),
                *where,
            )
        ]
    (doc,) = docs
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
        here = template.origin(_PARAMETERS.key(name))
        if parameter.default is not None:
            wrong = type_error(parameter, parameter.default)
            if wrong:
                errors.append(here.child("default").error(FieldError.invalid(_PARAMETERS.key(name), wrong)))
            if parameter.required:
                text = "a required parameter has no default: remove default or required"
                errors.append(here.child("required").error(FieldError.invalid(_PARAMETERS.key(name), text)))
        template.parameters[name] = parameter
    errors += _compile(template)
    return (None if errors else template), errors


class TemplateLibrary:
    """Templates by name, each found and loaded once; its problems are reported once."""

    def __init__(self, folders: list[Path] | None = None):
        self.folders = search_folders() if folders is None else folders
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
                if template is not None and template.name != name:
                    text = (
                        f"this template is named '{template.name}' but its file '{path.name}': "
                        f"the file of template '{template.name}' is {template.name}{path.suffix}"
                    )
                    at = template.origin(_ROOT.child("metadata", "name"))
                    errors = [at.error(FieldError.invalid(_ROOT.child("metadata", "name"), text))]
                    template = None
                self._loaded[name] = (template, errors, "")
        return self._loaded[name]


def _display(path: Path) -> str:
    try:
        return os.path.relpath(path) if not path.is_absolute() else str(path)
    except ValueError:  # another drive
        return str(path)


# ---- parameters -------------------------------------------------------------------------------

_TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "list": "a list",
    "map": "a map",
}


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
            errors.append(FieldError(ErrorType.invalid, _ROOT, text, COMMAND_LINE))
            continue
        path = _ROOT.child("template", "parameters", key)
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
        path = _ROOT.child("template", "parameters", name)
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
            path = _ROOT.child("template", "parameters", name)
            text = f"template '{template.name}' needs parameter '{name}' ({p.kind}"
            text += f": {p.description})" if p.description else ")"
            if missing_at.source is None:
                text += f": add --set {name}=VALUE"
            errors.append(missing_at.error(FieldError.required(path, text), key=True))
            continue
        values[name] = p.default
        at = _PARAMETERS.key(name)
        origins[name] = template.origin(at.key("default") if p.default is not None else at)
    return values, origins, errors


# ---- the sandbox ------------------------------------------------------------------------------


class _Refused(Exception):
    """A template expression did something the sandbox does not allow."""


@cache
def _environment():
    from jinja2 import StrictUndefined, nodes
    from jinja2.exceptions import SecurityError
    from jinja2.sandbox import SandboxedEnvironment

    class Sandbox(SandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**"})

        def call_binop(self, context, operator, left, right):
            if operator == "**" and isinstance(right, int | float) and abs(right) > 64:
                raise SecurityError("power")
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    if isinstance(seq, str | list) and isinstance(n, int) and len(seq) * n > MAX_RENDERED:
                        raise SecurityError("repeat")
            return super().call_binop(context, operator, left, right)

    env = Sandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.globals.clear()
    env.filters = {name: env.filters[name] for name in FILTERS}
    forbidden = (
        nodes.Call,
        nodes.Macro,
        nodes.CallBlock,
        nodes.Include,
        nodes.Import,
        nodes.FromImport,
        nodes.Extends,
        nodes.Block,
    )
    return env, nodes, forbidden


def _allowed(ast: Any) -> bool:
    _, nodes, forbidden = _environment()
    for node in ast.find_all(nodes.Node):
        if isinstance(node, forbidden):
            return False
        if isinstance(node, nodes.Getattr) and node.attr.startswith("_"):
            return False
        if (
            isinstance(node, nodes.Getitem)
            and isinstance(node.arg, nodes.Const)
            and isinstance(node.arg.value, str)
            and node.arg.value.startswith("_")
        ):
            return False
        if isinstance(node, nodes.Name) and node.name in ("self", "caller", "varargs", "kwargs"):
            return False
    return True


def _strings(value: Any, path: FieldPath) -> Iterable[tuple[FieldPath, str]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, path.key(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, path.index(i))
    elif isinstance(value, str) and any(m in value for m in _MARKERS):
        yield path, value


def _compile(template: Template) -> list[FieldError]:
    """Compile every string of the spec that uses jinja; report syntax, sandbox and name errors."""
    from jinja2 import TemplateSyntaxError, meta

    env, _, _ = _environment()
    errors = []
    params = list(template.parameters)
    for path, text in _strings(template.spec, _SPEC):
        origin = template.origin(path)
        try:
            ast = env.parse(text)
        except TemplateSyntaxError as exc:
            errors.append(_syntax_error(template, origin, exc))
            continue
        if not _allowed(ast):
            errors.append(origin.error(FieldError.forbidden(path, NOT_ALLOWED)))
            continue
        try:
            unknown = sorted(meta.find_undeclared_variables(ast) - set(params))
        except TemplateSyntaxError as exc:  # e.g. a filter that is not allowed
            errors.append(_syntax_error(template, origin, exc))
            continue
        if unknown:
            for name in unknown:
                text_ = f"'{name}' is not a parameter of template '{template.name}'"
                close = difflib.get_close_matches(name, params, n=1, cutoff=0.6)
                text_ += (
                    f"; did you mean '{close[0]}'?"
                    if close
                    else f"; parameters: {', '.join(params) or 'none'}"
                )
                errors.append(origin.error(FieldError.invalid(path, text_)))
            continue
        tokens = [t for t in env.lex(text) if t[1] != "whitespace"]
        native = (
            len(tokens) >= 2
            and tokens[0][1] == "variable_begin"
            and tokens[-1][1] == "variable_end"
            and sum(t[1] in ("variable_begin", "block_begin", "comment_begin") for t in tokens) == 1
            and text.startswith(tokens[0][2])
            and text.endswith(tokens[-1][2])
        )
        try:
            if native:
                inner = text[len(tokens[0][2]) : len(text) - len(tokens[-1][2])]
                expression = env.compile_expression(inner, undefined_to_none=False)
                middle = tokens[1:-1]
                name = middle[0][2] if len(middle) == 1 and middle[0][1] == "name" else None
                piece = _Piece(origin, lambda values, e=expression: e(**values), True, name)
            else:
                compiled = env.from_string(text)
                piece = _Piece(origin, compiled.render, False, None)
        except TemplateSyntaxError as exc:  # e.g. a filter that is not allowed
            errors.append(_syntax_error(template, origin, exc))
            continue
        template.pieces[path] = piece
    return errors


def _syntax_error(template: Template, origin: Origin, exc: Any) -> FieldError:
    """A jinja syntax error at the template file's line: the value's line plus the error's line."""
    file, line, column = origin.position()
    node = _node(template.document.source, template.document.index, origin.path)
    lineno = max(int(exc.lineno or 1), 1)
    if node is not None and getattr(node, "style", None) in ("|", ">"):
        line = (line or 1) + lineno  # a block scalar starts on the line after its indicator
        column = None
    elif lineno > 1:
        line, column = (line or 1) + lineno - 1, None
    if column is None:
        lines = template.document.source.text.splitlines()
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        column = len(text) - len(text.lstrip()) + 1
    message = exc.message or "syntax error"
    if message.startswith("No filter named"):
        message = message.rstrip(".") + f"; filters: {', '.join(f for f in FILTERS if f != 'd')}"
    text = f"template syntax error: {message}"
    return FieldError(ErrorType.syntax, origin.path, text, file, line, column)


def _node(source: Source, index: int, path: FieldPath) -> Any:
    from ruamel.yaml.nodes import MappingNode, SequenceNode

    nodes = source.nodes()
    if index >= len(nodes):
        return None
    node = nodes[index]
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


# ---- rendering --------------------------------------------------------------------------------


def render(
    template: Template, values: Mapping[str, Any], origins: Mapping[str, Origin]
) -> tuple[dict[str, Any] | None, dict[FieldPath, Origin], list[FieldError]]:
    """The template's spec with every expression evaluated, and the origin of every value in it.

    ``values`` must have passed ``resolve_parameters``. Paths in the origin map start at
    ``spec``. A field that renders to null is left out.
    """
    out_origins: dict[FieldPath, Origin] = {}
    errors: list[FieldError] = []
    values = dict(values)

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
        try:
            result = _evaluate(piece, values)
        except _Refused as exc:
            errors.append(origin.error(FieldError(ErrorType.forbidden, path, str(exc))))
            return None
        except _Failed as exc:
            errors.append(origin.error(FieldError.invalid(path, str(exc))))
            return None
        if piece.name is not None and piece.name in origins:
            where = replace(origins[piece.name], via=origin, parameter=piece.name)
        else:
            where = origin
        _mark(result, path, where, out_origins)
        return result

    spec = walk(template.spec, _SPEC, template.origin(_SPEC))
    return (None if errors else spec), out_origins, errors


def _mark(value: Any, path: FieldPath, origin: Origin, out: dict[FieldPath, Origin]) -> None:
    out[path] = origin
    if isinstance(value, dict):
        for k, v in value.items():
            _mark(v, path.key(k), origin.child(k), out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _mark(v, path.index(i), origin.child(i), out)


class _Failed(Exception):
    """An expression that could not be evaluated, in words fit for a user."""


def _evaluate(piece: _Piece, values: dict[str, Any]) -> Any:
    from jinja2 import TemplateError, Undefined
    from jinja2.exceptions import SecurityError, UndefinedError

    try:
        result = piece.run(values)
        if isinstance(result, Undefined):
            result._fail_with_undefined_error()
        return _plain(result) if piece.native else result
    except SecurityError as exc:
        raise _Refused(NOT_ALLOWED) from exc
    except UndefinedError as exc:
        raise _Failed(f"template expression: {exc.message}") from exc
    except _Refused:
        raise
    except (TemplateError, TypeError, ValueError, ArithmeticError, LookupError) as exc:
        raise _Failed(f"template expression failed: {exc}") from exc
    except Exception as exc:  # anything else the sandbox let through: never echo it
        raise _Refused(NOT_ALLOWED) from exc


def _plain(value: Any) -> Any:
    """The value as spec data (str, int, float, bool, null, list, map); anything else is refused."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k) if isinstance(k, str) else _bad_key(): _plain(v) for k, v in value.items()}
    raise _Refused(NOT_ALLOWED)


def _bad_key() -> str:
    raise _Refused(NOT_ALLOWED)


# ---- merging ----------------------------------------------------------------------------------

_MISSING: Any = object()


def merge(base: Any, over: Any) -> Any:
    """``over`` on top of ``base``: maps merge deeply, lists and scalars replace, null removes.

    Pure; neither argument is changed. ``merge(a, {}) == a``, and merging the same ``over``
    twice changes nothing: ``merge(merge(a, b), b) == merge(a, b)``.
    """
    if not isinstance(over, dict):
        return over
    out = dict(base) if isinstance(base, dict) else {}
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge(out.get(k, _MISSING), v)
    return out
