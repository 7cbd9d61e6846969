"""Validating run documents: the published JSON Schema, then the cross-field rules.

``validate_data(doc)`` is the one validator: the CLI, the API's 422 answers and plan all call it.
It enforces the checked-in schema (the same file editors use) with jsonschema-rs, maps each
schema error to a ``FieldError`` (the words come from the schema's ``errorMessage`` where it has
one, which comes from ``messages``), adds the rules a schema cannot say, and drops repeats.
pydantic is not imported here: ``astra validate`` pays for what it needs and nothing more.

``validate_files(paths)`` loads and validates files and folders, and gives every error with its
file, line and column.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import replace
from functools import cache
from typing import Any

from . import messages as msg
from .errors import ErrorType, FieldError
from .files import SPEC_SUFFIXES, find_files, published_schema
from .limits import check_limits, printable_path
from .loading import Document, load_file
from .paths import FieldPath
from .rules import check_rules

__all__ = [
    "SPEC_SUFFIXES",
    "find_files",
    "published_schema",
    "validate_data",
    "validate_documents",
    "validate_files",
]


@cache
def _validator(kind: str):
    import jsonschema_rs

    return jsonschema_rs.Draft7Validator(published_schema(kind))


def validate_data(doc: Any, kind: str = "run") -> list[FieldError]:
    """Every problem of one document, without positions, sorted by path.

    The limits of ``limits`` come first: a value they refuse (a lone surrogate, NaN, a 65-bit
    integer, runaway nesting) is reported in their words alone, and nothing else is said of
    that path or below it (the schema's words for such a value would be wrong: NaN is not
    "null"). A document nesting too deep is not given to the schema at all.
    """
    limited = check_limits(doc)
    if not limited and _schema_passes(doc, kind):  # nearly every document: no error to map
        found = _rules(doc, kind, combinations=False)  # the schema says those (``rules``)
        return _sorted(found) if found else []
    if limited and any(e.message == msg.TOO_DEEP for e in limited):
        return sorted(limited, key=lambda e: (e.path, e.message))
    schema = published_schema(kind)
    try:
        found = [e for error in _validator(kind).iter_errors(doc) for e in _map(error, schema, doc)]
    except ValueError:  # a key or value JSON cannot hold (a list as a key, a date, …)
        found = list(_not_json(doc, FieldPath.root()))
    found += _rules(doc, kind)
    if limited:
        refused = {e.path.steps for e in limited if e.path.steps}
        found = [replace(e, path=printable_path(e.path)) for e in found]
        found = limited + [e for e in found if not any(e.path.steps[: len(r)] == r for r in refused)]
    return _sorted(found)


def _rules(doc: Any, kind: str, *, combinations: bool = True) -> list[FieldError]:
    """The cross-field rules' problems of a run document (of a template's part: what it may leave
    to the template, unchecked); none for another kind. ``combinations``: see ``check_rules``."""
    if kind != "run":
        return []
    return check_rules(doc, partial=isinstance(doc, dict) and "template" in doc, combinations=combinations)


def _schema_passes(doc: Any, kind: str) -> bool:
    """The schema's verdict alone (0.4 µs less than asking for its errors, and none to map)."""
    try:
        return bool(_validator(kind).is_valid(doc))
    except ValueError:  # a key or value JSON cannot hold: said with the errors
        return False


def _sorted(found: list[FieldError]) -> list[FieldError]:
    """Each problem once, by path."""
    unique = {(e.path, e.message): e for e in found}
    return sorted(unique.values(), key=lambda e: (e.path, e.message))


def _close(word: str, words: Iterable[str]) -> list[str]:
    """The word of ``words`` closest to ``word``, if one is close (``difflib``: imported only
    for a problem to say, 1.3 ms of validate's start-up)."""
    import difflib

    return difflib.get_close_matches(word, words, n=1, cutoff=0.6)


def validate_documents(docs: Iterable[Document], kind: str = "run") -> list[FieldError]:
    errors = []
    for doc in docs:
        errors += [doc.source.position(e, doc.index) for e in validate_data(doc.data, kind)]
    return errors


def validate_files(
    paths: Iterable[str | os.PathLike[str]], kind: str = "run"
) -> tuple[list[Document], list[FieldError]]:
    """Load and validate files and folders: every document, and every error with its position."""
    files, errors = find_files(paths)
    documents = []
    for path in files:
        docs, load_errors = load_file(path)
        errors += load_errors
        errors += validate_documents(docs, kind)
        documents += docs
    return documents, errors


# ---- schema errors → FieldErrors -------------------------------------------------------------


def _subschema(schema: dict[str, Any], location: list[str | int]) -> dict[str, Any]:
    node: Any = schema
    for step in location:
        node = node[step]
    return node if isinstance(node, dict) else {}


def _render(message: str, doc: Any, path: FieldPath) -> str:
    """Fill ajv-errors' relative JSON Pointers: ``${1/size}`` is ``size`` beside the field."""
    while "${" in message:
        start = message.index("${")
        end = message.index("}", start)
        up, _, rest = message[start + 2 : end].partition("/")
        base = path.steps[: len(path.steps) - int(up)]
        value: Any = doc
        for step in (*base, *rest.split("/")) if rest else base:
            try:
                value = value[step]
            except (KeyError, IndexError, TypeError):
                value = "?"
                break
        message = message[:start] + json.dumps(value) + message[end + 1 :]
    return message


def _map(error: Any, schema: dict[str, Any], doc: Any) -> Iterator[FieldError]:
    path = FieldPath.of(error.instance_path)
    location = list(error.schema_path)
    keyword = error.kind.name
    node = _subschema(schema, location[:-1])
    custom = node.get("errorMessage")

    if keyword == "additionalProperties":
        known = sorted(node.get("properties", {}))
        for name in error.kind.unexpected:
            text = msg.UNKNOWN_FIELD.format(name=name)
            close = _close(name, known)
            if close:
                text += msg.DID_YOU_MEAN.format(suggestion=close[0])
            yield FieldError.unknown(path.key(name), text)
        return
    if keyword == "required":
        missing = error.kind.property
        yield FieldError.required(path.key(missing), custom or f"missing required field '{missing}': add it")
        return
    if keyword == "propertyNames":
        inner = error.kind.error
        text = custom or _default(inner.kind, inner.instance)
        yield FieldError(ErrorType.invalid, path.key(str(inner.instance)), text, extra={"key": True})
        return
    if keyword == "anyOf" and not custom:
        # a loosened (partial) field: the first branch is the field itself
        branch = error.kind.context[0] if error.kind.context else []
        for inner in branch:
            yield from _map(inner, schema, doc)
        return
    text = _render(custom, doc, path) if custom else _default(error.kind, error.instance)
    kind = ErrorType.not_supported if keyword == "enum" else ErrorType.invalid
    if keyword in ("const", "type") and custom and node.get("type") == "null":
        kind = ErrorType.forbidden
    yield FieldError(kind, path, text)


_TYPE_WORDS = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "true or false",
    "object": "a mapping",
    "array": "a list",
    "null": "null",
}


def _default(kind: Any, instance: Any) -> str:
    name = kind.name
    if name == "type":
        wanted = " or ".join(_TYPE_WORDS.get(t, t) for t in kind.types)
        hint = " (quote it)" if kind.types == ["string"] and isinstance(instance, int | float | bool) else ""
        return f"must be {wanted}, not {msg.describe(instance)}{hint}"
    if name == "enum":
        options = [str(o) for o in kind.options]
        text = f"must be one of {', '.join(options)}, not {msg.describe(instance)}"
        if isinstance(instance, str):
            folded = {o.lower(): o for o in options}
            close = folded.get(instance.lower()) or next(iter(_close(instance, options)), None)
            if close:
                text += msg.DID_YOU_MEAN.format(suggestion=close)
        return text
    if name == "const":
        return f"must be {json.dumps(kind.expected_value)}"
    if name == "minimum":
        return f"must be at least {kind.limit}, not {instance}"
    if name == "maximum":
        return f"must be at most {kind.limit}, not {instance}"
    if name == "minLength":
        return "must not be empty" if kind.limit == 1 else f"must be at least {kind.limit} characters"
    if name == "maxLength":
        return f"must be at most {kind.limit} characters, not {len(instance)}"
    if name == "minItems":
        return "must not be empty" if kind.limit == 1 else f"must have at least {kind.limit} items"
    if name == "pattern":
        return f"must match the pattern {kind.pattern}"
    return f"is not valid ({name})"


def _not_json(value: Any, path: FieldPath) -> Iterator[FieldError]:
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                yield FieldError.invalid(path.key(str(k)), "keys must be strings: quote the key")
            else:
                yield from _not_json(v, path.key(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _not_json(v, path.index(i))
    elif not isinstance(value, str | int | float | bool | type(None)):
        yield FieldError.invalid(path, f"{type(value).__name__} values are not allowed here: quote the value")
