"""The jinja2 sandbox: what a template's expressions may do, compiling them, and evaluating them.

Rendering is jinja2's ``SandboxedEnvironment`` with ``StrictUndefined``, applied to string values
only, never to the YAML text. A value that is exactly one expression (``"{{ gpus }}"``) is
evaluated natively and keeps its type; any other string with ``{{ }}`` or ``{% %}`` renders to a
string. Templates may use parameters, literals, the filters in ``FILTERS`` and jinja's tests:
no calls, no ``_``-attributes, no globals (``range``, ``cycler``, …), no macros, imports or
includes. What the sandbox refuses is reported with one fixed message (``NOT_ALLOWED``) that
never names what the expression touched. Every operator, filter, loop, ``~`` and output is
charged to the rendering's ``Budget`` (``budget``: the limits and their words), which the values
carry under a name no template can write (``BUDGET``).

Owns: the environment (made once, jinja2 imported on first use), checking and compiling every
string of a template's spec (``compile_template``: syntax errors at the template file's line),
evaluating one compiled string (``evaluate``) into plain spec data, and wiring the budget into
jinja2 (the sandbox's operator hook, wrapped filters, ``finalize``, and the loops and ``~`` of
a parsed template routed through the environment: ``_instrument``).

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
from .budget import (
    INTEGER,
    NESTING,
    NESTING_MAX,
    Budget,
    OverBudget,
    before_binop,
    before_filter,
    bracket_depth,
    tree_depth,
)
from .origins import SPEC, Origin, yaml_node

if TYPE_CHECKING:
    from .library import Template

__all__ = [
    "BUDGET",
    "FILTERS",
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
#: Where a rendering's ``Budget`` is in the values a template sees: no template can name it.
BUDGET = "astra budget"
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
    from jinja2 import StrictUndefined, nodes, pass_context
    from jinja2.sandbox import SandboxedEnvironment

    class Sandbox(SandboxedEnvironment):
        intercepted_binops = frozenset({"+", "-", "*", "/", "//", "%", "**"})

        def call_binop(self, context, operator, left, right):
            budget = context[BUDGET]
            before_binop(operator, left, right)
            return budget.value(super().call_binop(context, operator, left, right))

    env = Sandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.globals.clear()
    env.filters = {name: _charged(name, env.filters[name], pass_context) for name in FILTERS}
    # every output, loop and ``~`` is charged to the rendering's budget (see ``_instrument``)
    env.finalize = pass_context(lambda context, value: context[BUDGET].write(str(value)))
    env.budget_iterate = pass_context(lambda context, iterable: context[BUDGET].iterate(iterable))
    env.budget_concat = pass_context(lambda context, *parts: context[BUDGET].value("".join(map(str, parts))))
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


def _charged(name: str, function: Callable[..., Any], pass_context: Any) -> Callable[..., Any]:
    """A filter that charges the budget: refused before it runs if its result would be over a
    limit, and its result checked. It takes the context, so jinja never runs it while compiling
    (constant folding would run it outside any budget)."""

    def run(context: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
        budget = context[BUDGET]
        value = before_filter(name, value, args, kwargs, budget)
        return budget.value(context.call(function, value, *args, **kwargs))

    return pass_context(run)


def _instrument(ast: Any) -> Any:
    """The parsed template with its loops, ``~`` and output routed through the budget: a loop's
    iterable is ``environment.budget_iterate(…)``, ``a ~ b`` is ``environment.budget_concat(a, b)``
    and literal text is output as a constant (so that it goes through ``finalize``)."""
    from jinja2 import nodes
    from jinja2.visitor import NodeTransformer

    def call(name: str, args: list, lineno: int) -> Any:
        return nodes.Call(nodes.EnvironmentAttribute(name), args, [], None, None, lineno=lineno)

    class Charge(NodeTransformer):
        def visit_For(self, node):
            node = self.generic_visit(node)
            node.iter = call("budget_iterate", [node.iter], node.lineno)
            return node

        def visit_Concat(self, node):
            node = self.generic_visit(node)
            return call("budget_concat", node.nodes, node.lineno)

        def visit_Output(self, node):
            node = self.generic_visit(node)
            node.nodes = [
                nodes.Const(n.data, lineno=n.lineno) if isinstance(n, nodes.TemplateData) else n
                for n in node.nodes
            ]
            return node

    return Charge().visit(ast)


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
    """Compile every string of the spec that uses jinja; report syntax, sandbox, nesting and name errors."""
    errors: list[FieldError] = []
    for path, text in _strings(template.spec, SPEC):
        found = _compile(template, path, text)
        if isinstance(found, Piece):
            template.pieces[path] = found
        else:
            errors += found
    return errors


def _compile(template: Template, path: FieldPath, text: str) -> Piece | list[FieldError]:
    """One string: lexed (its brackets counted before the parser, which recurses, sees them),
    parsed, measured, checked against the sandbox's rules and the parameters, compiled."""
    from jinja2 import TemplateSyntaxError, meta
    from jinja2.environment import TemplateExpression

    env, nodes, _ = environment()
    origin = template.origin(path)
    try:
        tokens = [t for t in env.lex(text) if t[1] != "whitespace"]
        depth, line = bracket_depth(tokens)
        if depth <= NESTING_MAX:
            try:
                ast = env.parse(text)
            except ValueError as exc:  # the lexer's int(): a literal of more than 4300 digits
                raise OverBudget(INTEGER) from exc
            depth, line = tree_depth(ast)
        if depth > NESTING_MAX:
            return [_positioned(template, origin, line, ErrorType.too_long, NESTING)]
        if not allowed(ast):
            return [origin.error(FieldError.forbidden(path, NOT_ALLOWED))]
        unknown = sorted(meta.find_undeclared_variables(ast) - set(template.parameters))
        if unknown:
            return [origin.error(FieldError.invalid(path, _not_a_parameter(template, n))) for n in unknown]
        one = ast.body[0].nodes if len(ast.body) == 1 and isinstance(ast.body[0], nodes.Output) else []
        if _native(tokens, text) and len(one) == 1:
            body = [nodes.Assign(nodes.Name("result", "store"), one[0], lineno=1)]
            compiled = env.from_string(_instrument(nodes.Template(body, lineno=1)))
            expression = TemplateExpression(compiled, False)
            middle = tokens[1:-1]
            param = middle[0][2] if len(middle) == 1 and middle[0][1] == "name" else None
            return Piece(origin, partial(_call, expression), True, param)
        return Piece(origin, env.from_string(_instrument(ast)).render, False, None)
    except TemplateSyntaxError as exc:  # also a filter that is not allowed
        line = max(int(exc.lineno or 1), 1)
        message = exc.message or "syntax error"
        if message.startswith("No filter named"):
            message = message.rstrip(".") + f"; filters: {', '.join(f for f in FILTERS if f != 'd')}"
        return [_positioned(template, origin, line, ErrorType.syntax, f"template syntax error: {message}")]
    except OverBudget as exc:  # an integer literal out of 64 bits
        return [origin.error(FieldError(ErrorType.too_long, path, str(exc)))]
    except (RecursionError, SyntaxError):
        # operators chained past what jinja's parser or Python's compiler nests (the brackets
        # and the tree were measured first): the same limit, at the value
        return [origin.error(FieldError(ErrorType.too_long, path, NESTING))]


def _native(tokens: list[tuple[int, str, str]], text: str) -> bool:
    """Whether ``text`` is exactly one expression (``{{ gpus }}``), which keeps its type."""
    return (
        len(tokens) >= 2
        and tokens[0][1] == "variable_begin"
        and tokens[-1][1] == "variable_end"
        and sum(t[1] in ("variable_begin", "block_begin", "comment_begin") for t in tokens) == 1
        and text.startswith(tokens[0][2])
        and text.endswith(tokens[-1][2])
    )


def _not_a_parameter(template: Template, name: str) -> str:
    params = list(template.parameters)
    text = f"'{name}' is not a parameter of template '{template.name}'"
    close = difflib.get_close_matches(name, params, n=1, cutoff=0.6)
    if close:
        return f"{text}; did you mean '{close[0]}'?"
    return f"{text}; parameters: {', '.join(params) or 'none'}"


def _call(expression: Callable[..., Any], values: dict[str, Any]) -> Any:
    """A compiled expression evaluated with the parameters' values."""
    return expression(**values)


def _positioned(template: Template, origin: Origin, lineno: int, kind: ErrorType, text: str) -> FieldError:
    """An error at the template file's line: the value's line plus the line within the value."""
    file, line, column = origin.position()
    node = yaml_node(template.document.source, template.document.index, origin.path)
    if node is not None and getattr(node, "style", None) in ("|", ">"):
        line = (line or 1) + lineno  # a block scalar starts on the line after its indicator
        column = None
    elif lineno > 1:
        line, column = (line or 1) + lineno - 1, None
    if column is None and line is not None:
        lines = template.document.source.text.splitlines()
        here = lines[line - 1] if 0 < line <= len(lines) else ""
        column = len(here) - len(here.lstrip()) + 1
    return FieldError(kind, origin.path, text, file, line, column)


def evaluate(piece: Piece, values: dict[str, Any], budget: Budget) -> Any:
    """One compiled string evaluated with the parameters' values, charged to ``budget``.

    Raises ``OverBudget`` (a limit, in its words), ``Refused`` or ``Failed``."""
    from jinja2 import TemplateError, Undefined
    from jinja2.exceptions import SecurityError, UndefinedError

    budget.start_value()
    try:
        result = piece.run({**values, BUDGET: budget})
        if isinstance(result, Undefined):
            result._fail_with_undefined_error()
        result = _plain(budget.value(result)) if piece.native else result
    except SecurityError as exc:
        raise Refused(NOT_ALLOWED) from exc
    except UndefinedError as exc:
        raise Failed(f"template expression: {exc.message}") from exc
    except (Refused, OverBudget):
        raise
    except RecursionError as exc:  # not reached with the nesting measured; never a traceback
        raise OverBudget(NESTING) from exc
    except (TemplateError, TypeError, ValueError, ArithmeticError, LookupError) as exc:
        raise Failed(f"template expression failed: {exc}") from exc
    except Exception as exc:  # anything else the sandbox let through: never echo it
        raise Refused(NOT_ALLOWED) from exc
    budget.rendered(result)
    return result


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
