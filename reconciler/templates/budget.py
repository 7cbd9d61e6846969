"""A template's budget: how much one rendering may compute, build and write, and where it is counted.

A template is committed by anyone with write access to a repository, and ``watch`` and CI
render it. One ``Budget`` is spent by one rendering of a template (every value of its spec for
one run spec). The sandbox charges it at each loop iteration, each operator, each filter and
each piece of output; going over a limit raises ``OverBudget``, whose words name the limit, at
the point where the work would start (an operation whose result would be too large is refused
before it is computed), so that memory stays bounded and the rendering stops well under a second
after its time is up. Nothing here kills a thread or sets a signal: the clock is read at each
charge.

    limit                   counted                                    words
    RENDER_SECONDS          computing time of one rendering            TIME
    LOOP_ITERATIONS_MAX     {% for %} iterations of one rendering      ITERATIONS
    VALUE_MAX               each value built or rendered (characters)  VALUE
    DOCUMENT_MAX            everything one rendering renders           DOCUMENT
    INT_MIN … INT_MAX       every integer an operator or filter makes  INTEGER
    NESTING_MAX             brackets, blocks and operators, nested     NESTING
    ROUND_DIGITS_MAX        round's precision, either way              ROUND
    DEPTH_MAX               a value's nesting (as a run spec's)        DEPTH

Owns: the limits and their words, ``Budget``, ``OverBudget``, the size of a value (``measure``),
what an operator or a filter would cost before it runs (``before_binop``, ``before_filter``),
and the nesting of a template string (``bracket_depth`` over its tokens, ``tree_depth`` over its
syntax tree). Must not touch: jinja2's environment (``sandbox`` wires these in), files, parameters.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..runspec.messages import ARG_MAX, DEPTH_MAX, DOCUMENT_MAX_BYTES, INT_MAX, INT_MIN

__all__ = [
    "DEPTH",
    "DEPTH_MAX",
    "DOCUMENT",
    "DOCUMENT_MAX",
    "INTEGER",
    "ITERATIONS",
    "LOOP_ITERATIONS_MAX",
    "NESTING",
    "NESTING_MAX",
    "RENDER_SECONDS",
    "ROUND",
    "ROUND_DIGITS_MAX",
    "TIME",
    "VALUE",
    "VALUE_MAX",
    "Budget",
    "OverBudget",
    "before_binop",
    "before_filter",
    "bracket_depth",
    "measure",
    "tree_depth",
]

#: Computing time (this thread's CPU time) of one rendering; an honest template takes milliseconds.
RENDER_SECONDS = 1.0
#: Iterations of all the ``{% for %}`` loops of one rendering (jinja's own ``range`` cap).
LOOP_ITERATIONS_MAX = 100_000
#: Characters of one value, built or rendered: the longest text a run spec holds (an argument).
VALUE_MAX = ARG_MAX
#: Characters one rendering may render in all: a whole run spec's size.
DOCUMENT_MAX = DOCUMENT_MAX_BYTES
#: Brackets, blocks and operators nested in one template string (Python itself nests 20 blocks).
NESTING_MAX = 16
#: ``round``'s precision either way: the range of a float's exponent.
ROUND_DIGITS_MAX = 308

_PREFIX = "template limit: "
TIME = _PREFIX + f"rendering may take at most {RENDER_SECONDS:g} s of computing"
ITERATIONS = _PREFIX + f"loops may run at most {LOOP_ITERATIONS_MAX} times in one rendering"
VALUE = _PREFIX + f"a value may be at most {VALUE_MAX} characters"
DOCUMENT = _PREFIX + f"a template may render at most {DOCUMENT_MAX} characters in all"
INTEGER = _PREFIX + f"integers may be from {INT_MIN} to {INT_MAX} (64 bits)"
NESTING = _PREFIX + f"brackets, blocks and operators may nest at most {NESTING_MAX} levels deep"
ROUND = _PREFIX + f"round's precision may be from -{ROUND_DIGITS_MAX} to {ROUND_DIGITS_MAX}"
DEPTH = _PREFIX + f"a value may nest at most {DEPTH_MAX} levels deep"


class OverBudget(Exception):
    """A rendering went over one of its limits; the message is one of the words above."""


class Budget:
    """What one rendering of a template has spent; every charge may raise ``OverBudget``.

    ``clock`` is read at every charge (this thread's CPU time unless a test gives its own).
    """

    def __init__(self, clock: Callable[[], float] = time.thread_time, seconds: float = RENDER_SECONDS):
        self.clock = clock
        self.deadline = clock() + seconds
        self.iterations = 0
        self.written = 0  # characters output while rendering the current value
        self.document = 0  # characters of the values rendered so far
        self.spent: str | None = None  # the words of a limit that ends the whole rendering

    def _over(self, words: str, *, whole: bool = False) -> OverBudget:
        if whole:
            self.spent = words
        return OverBudget(words)

    def charge(self) -> None:
        """One step of work: the clock is read."""
        if self.spent is not None:
            raise OverBudget(self.spent)
        if self.clock() > self.deadline:
            raise self._over(TIME, whole=True)

    def tick(self) -> None:
        """One loop iteration."""
        self.iterations += 1
        if self.iterations > LOOP_ITERATIONS_MAX:
            raise self._over(ITERATIONS, whole=True)
        self.charge()

    def iterate(self, iterable: Any) -> Any:
        """``iterable`` as a loop sees it, each iteration charged (its length kept)."""
        return _Counted(iterable, self)

    def value(self, value: Any) -> Any:
        """A value an operator or a filter made: within the limits, or ``OverBudget``."""
        self.charge()
        if isinstance(value, int) and not isinstance(value, bool):
            if not INT_MIN <= value <= INT_MAX:
                raise OverBudget(INTEGER)
        elif isinstance(value, str):
            if len(value) > VALUE_MAX:
                raise OverBudget(VALUE)
        elif isinstance(value, list | tuple | dict):
            measure(value)
        return value

    def write(self, text: str) -> str:
        """A piece of output of the current value."""
        self.charge()
        self.written += len(text)
        if self.written > VALUE_MAX:
            raise OverBudget(VALUE)
        return text

    def start_value(self) -> None:
        self.charge()
        self.written = 0

    def rendered(self, value: Any) -> None:
        """A whole value of the spec, rendered: it counts towards the document."""
        self.document += measure(value)
        if self.document > DOCUMENT_MAX:
            raise self._over(DOCUMENT, whole=True)


class _Counted:
    """An iterable whose every item charges a ``Budget`` (as a loop's iteration, or only as work);
    ``len`` as the iterable's."""

    __slots__ = ("budget", "iterable", "step")

    def __init__(self, iterable: Any, budget: Budget, *, loop: bool = True):
        self.iterable, self.budget = iterable, budget
        self.step = budget.tick if loop else budget.charge

    def __len__(self) -> int:
        return len(self.iterable)

    def __iter__(self) -> Iterator[Any]:
        for item in self.iterable:
            self.step()
            yield item


def measure(value: Any, limit: int = VALUE_MAX) -> int:
    """A value's size: characters of its texts plus one per item, within ``limit`` or ``OverBudget``.

    Iterative, and stops as soon as the size is over the limit, so it costs at most ``limit``
    steps; a value nested deeper than ``DEPTH_MAX`` levels is refused too.
    """
    size = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            size += len(item)
        elif isinstance(item, list | tuple):
            size += len(item)
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, dict):
            size += len(item)
            stack.extend((v, depth + 1) for kv in item.items() for v in kv)
        else:
            size += 1
        if size > limit:
            raise OverBudget(VALUE)
        if depth > DEPTH_MAX:
            raise OverBudget(DEPTH)
    return size


# ---- what an operation would cost, before it runs --------------------------------------------

_FORMAT = re.compile(r"%(?:\([^)]*\))?[#0 +-]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?([a-zA-Z%])")


def before_binop(operator: str, left: Any, right: Any) -> None:
    """Refuse ``left OPERATOR right`` if its result would be over a limit (the result is checked too)."""
    both_int = _is_int(left) and _is_int(right)
    if operator == "**":
        # |left| ** right has about (bits of |left| - 1) * right bits
        if both_int and right > 0 and abs(left) > 1 and (abs(left).bit_length() - 1) * right > 64:
            raise OverBudget(INTEGER)
    elif operator == "*":
        if both_int and abs(left).bit_length() + abs(right).bit_length() > 66:
            raise OverBudget(INTEGER)
        for seq, n in ((left, right), (right, left)):
            repeated = isinstance(seq, str | list | tuple) and isinstance(n, int) and n > 1
            if repeated and measure(seq) * n > VALUE_MAX:
                raise OverBudget(VALUE)
    elif operator == "%" and isinstance(left, str):
        _before_format(left, right)


def _before_format(text: str, args: Any) -> None:
    """``text % args`` pads at most ``VALUE_MAX`` characters in all (``%*d`` widths taken from args)."""
    given = list(args) if isinstance(args, tuple) else [args]
    padding = 0
    for match in _FORMAT.finditer(text):
        for number in match.group(1, 2):
            if number == "*":
                n = given.pop(0) if given else 0
                padding += abs(n) if _is_int(n) else 0
            elif number:
                padding += int(number) if len(number) < 10 else VALUE_MAX + 1
        if match.group(3) != "%" and given:
            given.pop(0)
    if padding > VALUE_MAX:
        raise OverBudget(VALUE)


def before_filter(name: str, value: Any, args: tuple, kwargs: dict, budget: Budget) -> Any:
    """Refuse a filter whose result would be over a limit; returns the value the filter is given.

    The result is checked too (``Budget.value``); these are the filters that could build a large
    result or work long before returning it. ``sum`` adds lists one by one (a quadratic copy):
    it is given its items one at a time, the clock read at each.
    """
    if name == "replace":
        text = str(value)
        old, new = str(_arg(args, kwargs, 0, "old", "")), str(_arg(args, kwargs, 1, "new", ""))
        count = _arg(args, kwargs, 2, "count", None)
        times = len(text) + 1 if not old else len(text) // len(old)
        if _is_int(count) and count >= 0:
            times = min(times, count)
        if len(text) + times * max(len(new) - len(old), 0) > VALUE_MAX:
            raise OverBudget(VALUE)
    elif name == "join":
        glue = str(_arg(args, kwargs, 0, "d", ""))
        if isinstance(value, list | tuple | dict | str) and len(value) * len(glue) > VALUE_MAX:
            raise OverBudget(VALUE)
    elif name == "round":
        digits = _arg(args, kwargs, 0, "precision", 0)
        if _is_int(digits) and abs(digits) > ROUND_DIGITS_MAX:
            raise OverBudget(ROUND)
    elif name == "sum" and isinstance(value, Iterable) and not isinstance(value, str):
        return _Counted(value, budget, loop=False)
    return value


def _arg(args: tuple, kwargs: dict, index: int, name: str, default: Any) -> Any:
    return args[index] if len(args) > index else kwargs.get(name, default)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ---- nesting ---------------------------------------------------------------------------------

_OPEN = frozenset({"lparen", "lbracket", "lbrace"})
_CLOSE = frozenset({"rparen", "rbracket", "rbrace"})


def bracket_depth(tokens: Iterable[tuple[int, str, str]]) -> tuple[int, int]:
    """The deepest bracket nesting of a token stream (jinja's lexer), and the line where it is
    deepest; the count stops past ``NESTING_MAX``, so that the parser (which recurses) never sees it."""
    depth = deepest = 0
    line = 1
    for lineno, kind, _ in tokens:
        if kind in _OPEN:
            depth += 1
            if depth > deepest:
                deepest, line = depth, lineno
                if deepest > NESTING_MAX:
                    break
        elif kind in _CLOSE:
            depth -= 1
    return deepest, line


def tree_depth(ast: Any) -> tuple[int, int]:
    """How deep a parsed template nests, and the line where it is deepest; integer literals out
    of 64 bits raise ``OverBudget``.

    A level is a node that holds others (a loop, a condition, an operator, a filter, a list),
    the template and its output statements aside: ``{% for %}`` in ``{% for %}`` is two, and so
    is ``[[1]]``. Iterative: a tree too deep for recursion is measured too.
    """
    from jinja2 import nodes

    deepest, line = 0, 1
    stack = [(ast, 0)]
    while stack:
        node, depth = stack.pop()
        children = list(node.iter_child_nodes())
        if children and not isinstance(node, nodes.Template | nodes.Output):
            depth += 1
            if depth > deepest:
                deepest, line = depth, node.lineno or line
        if isinstance(node, nodes.Const) and _is_int(node.value) and not INT_MIN <= node.value <= INT_MAX:
            raise OverBudget(INTEGER)
        stack.extend((child, depth) for child in children)
    return deepest, line
