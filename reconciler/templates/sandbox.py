"""The jinja2 sandbox: what a template's expressions may do, compiling them, and evaluating them.

Rendering is jinja2's ``SandboxedEnvironment`` with ``StrictUndefined``, applied to string values
only, never to the YAML text. A value that is exactly one expression (``"{{ gpus }}"``) is
evaluated natively and keeps its type; any other string with ``{{ }}`` or ``{% %}`` renders to a
string. Templates may use parameters, literals, the filters in ``FILTERS`` and jinja's tests:
no calls, no ``_``-attributes, no globals (``range``, ``cycler``, …), no macros, imports or
includes; ``*`` and ``**`` are bounded. What the sandbox refuses is reported with one fixed
message (``NOT_ALLOWED``) that never names what the expression touched.

Owns: the environment (made once, jinja2 imported on first use), checking and compiling every
string of a template's spec (``compile_template``: syntax errors at the template file's line),
evaluating one compiled string (``evaluate``) into plain spec data.

Must not touch: files, parameters' types, merging; it walks the spec it is given.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache, partial
from typing import TYPE_CHECKING, Any

from ..runspec.errors import ErrorType, FieldError
from ..runspec.paths import FieldPath
from .origins import SPEC, Origin, yaml_node

if TYPE_CHECKING:
    from .library import Template

__all__ = [
    "FILTERS",
    "MAX_RENDERED",
    "NOT_ALLOWED",
    "Failed",
    "Piece",
    "Refused",
    "compile_template",
    "environment",
    "evaluate",
]

NOT_ALLOWED = (
    "this expression is not allowed in a template: templates may use parameters, literals and filters only"
)
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
MAX_RENDERED = 100_000
_MARKERS = ("{{", "{%", "{#")


@dataclass(frozen=True)
class Piece:
    """One string value of a template's spec, compiled."""

    origin: Origin
    run: Callable[[dict[str, Any]], Any]
    native: bool  # one expression: keeps its type
    name: str | None  # the parameter, when the expression is just its name


class Refused(Exception):
    """A template expression did something the sandbox does not allow."""


class Failed(Exception):
    """An expression that could not be evaluated, in words fit for a user."""


@cache
def environment():
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


def allowed(ast: Any) -> bool:
    _, nodes, forbidden = environment()
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


def compile_template(template: Template) -> list[FieldError]:
    """Compile every string of the spec that uses jinja; report syntax, sandbox and name errors."""
    from jinja2 import TemplateSyntaxError, meta

    env, _, _ = environment()
    errors = []
    params = list(template.parameters)
    for path, text in _strings(template.spec, SPEC):
        origin = template.origin(path)
        try:
            ast = env.parse(text)
        except TemplateSyntaxError as exc:
            errors.append(_syntax_error(template, origin, exc))
            continue
        if not allowed(ast):
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
                param = middle[0][2] if len(middle) == 1 and middle[0][1] == "name" else None
                piece = Piece(origin, partial(_call, expression), True, param)
            else:
                compiled = env.from_string(text)
                piece = Piece(origin, compiled.render, False, None)
        except TemplateSyntaxError as exc:  # e.g. a filter that is not allowed
            errors.append(_syntax_error(template, origin, exc))
            continue
        template.pieces[path] = piece
    return errors


def _call(expression: Callable[..., Any], values: dict[str, Any]) -> Any:
    """A compiled expression evaluated with the parameters' values."""
    return expression(**values)


def _syntax_error(template: Template, origin: Origin, exc: Any) -> FieldError:
    """A jinja syntax error at the template file's line: the value's line plus the error's line."""
    file, line, column = origin.position()
    node = yaml_node(template.document.source, template.document.index, origin.path)
    lineno = max(int(exc.lineno or 1), 1)
    if node is not None and getattr(node, "style", None) in ("|", ">"):
        line = (line or 1) + lineno  # a block scalar starts on the line after its indicator
        column = None
    elif lineno > 1:
        line, column = (line or 1) + lineno - 1, None
    if column is None and line is not None:
        lines = template.document.source.text.splitlines()
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        column = len(text) - len(text.lstrip()) + 1
    message = exc.message or "syntax error"
    if message.startswith("No filter named"):
        message = message.rstrip(".") + f"; filters: {', '.join(f for f in FILTERS if f != 'd')}"
    text = f"template syntax error: {message}"
    return FieldError(ErrorType.syntax, origin.path, text, file, line, column)


def evaluate(piece: Piece, values: dict[str, Any]) -> Any:
    from jinja2 import TemplateError, Undefined
    from jinja2.exceptions import SecurityError, UndefinedError

    try:
        result = piece.run(values)
        if isinstance(result, Undefined):
            result._fail_with_undefined_error()
        return _plain(result) if piece.native else result
    except SecurityError as exc:
        raise Refused(NOT_ALLOWED) from exc
    except UndefinedError as exc:
        raise Failed(f"template expression: {exc.message}") from exc
    except Refused:
        raise
    except (TemplateError, TypeError, ValueError, ArithmeticError, LookupError) as exc:
        raise Failed(f"template expression failed: {exc}") from exc
    except Exception as exc:  # anything else the sandbox let through: never echo it
        raise Refused(NOT_ALLOWED) from exc


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
    raise Refused(NOT_ALLOWED)


def _bad_key() -> str:
    raise Refused(NOT_ALLOWED)
