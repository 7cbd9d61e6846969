"""Loading spec files: bytes → documents, with positions for the ones that need them.

The one loading function is ``load_file`` (and ``load_text`` for text already read). It reads
YAML 1.2 (what yaml-language-server reads, so the editor and the CLI see the same values) and
strict JSON for ``.json`` files, one or several documents per file.

The fast path is yaml-rs, a Rust loader: no positions, but ten times PyYAML's speed. Positions
are needed only for documents that fail or warn: ``FileText.locate`` reads them from a plain block
document's lines (``positions``: a few µs, where composing costs hundreds), else composes the
document with ruamel.yaml (C-backed) the first time an error needs a line and a column, and
keeps that node tree. A file of several documents is split at its document markers (``---``,
``...``): the markers also tell several documents from one document that is a list (yaml-rs
gives both as a list), and only a failing document's own lines are composed, so a file of a
hundred thousand documents loads as fast per document as that many files (``task bench --only
multidoc``).

Every failure is a ``FieldError`` with the file, line and column, never an exception: an empty
file, a list at the top, bytes that are not UTF-8, duplicate keys, tabs, syntax errors, JSON's
trailing commas, alias bombs (refused after a bounded number of expansions), nesting deep
enough to crash yaml-rs (``nesting``: refused before it reads the text) and files over 10 MB.
"""

from __future__ import annotations

import codecs
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from . import messages as msg
from .errors import ErrorType, FieldError
from .files import read_file
from .nesting import refused
from .paths import FieldPath
from .positions import ODD, block_position

__all__ = ["Document", "FileText", "load_file", "load_text"]

_ROOT = FieldPath.root()
_SEPARATOR = re.compile(r"^(---|\.\.\.)(\s|$)", re.M)
_MARKER = re.compile(r"^(---|\.\.\.)(?:[ \t\r]|$)", re.M)
_DIRECTIVE = re.compile(r"^%", re.M)
_YAML_RS_POSITION = re.compile(r"at line (\d+), column (\d+)")


@dataclass
class FileText:
    """One file's text, and (once asked for) the node tree of a document, for positions.

    A document's nodes are composed from its own lines only (``document_lines``), so that the
    position of one error in a file of a hundred thousand documents costs one small document.
    """

    name: str
    text: str
    json: bool = False
    #: positions from each document's own lines; ``False``: compose the whole file (the plain
    #: path, which the split one must agree with)
    split: bool = True
    _nodes: list | None = field(default=None, repr=False)
    _starts: list[int] | None = field(default=None, repr=False)
    _documents: dict[int, Any] = field(default_factory=dict, repr=False)
    _lines: list[str] | None = field(default=None, repr=False)

    def nodes(self) -> list:
        """The composed documents of the whole file; empty when the composer cannot read what
        yaml-rs could."""
        if self._nodes is None:
            try:
                self._nodes = _compose(self.text)
            except Exception:  # positions fall back to 1:1; the error itself is still reported
                self._nodes = []
        return self._nodes

    def document_lines(self) -> list[int] | None:
        """The 0-based line where each document starts, or ``None`` when the text is one the
        splitter leaves to the composer (JSON, YAML directives)."""
        if self._starts is None and self.split and not self.json:
            self._starts = _document_starts(self.text) or []
        return self._starts or None

    def node(self, index: int) -> tuple[Any, int]:
        """The composed node of document ``index`` (``None`` if there is none) and the 0-based
        line its text starts on."""
        starts = self.document_lines()
        if starts is None:
            nodes = self.nodes()
            return (nodes[index] if index < len(nodes) else None), 0
        if index >= len(starts):
            return None, 0
        if index not in self._documents:
            try:
                composed = _compose(self.document_text(index))
            except Exception:  # as ``nodes``: the position falls back to 1:1
                composed = []
            self._documents[index] = composed[0] if composed else None
        return self._documents[index], starts[index]

    def document_text(self, index: int) -> str:
        """The lines of document ``index`` (``document_lines`` must know them)."""
        starts = self.document_lines() or [0]
        if self._lines is None:
            self._lines = self.text.splitlines(keepends=True)
        end = starts[index + 1] if index + 1 < len(starts) else None
        return "".join(self._lines[starts[index] : end])

    def locate(self, index: int, path: FieldPath, *, key: bool = False) -> tuple[int, int]:
        """1-based line and column of the value at ``path`` (its key with ``key``).

        A path that does not exist (a missing required field) resolves to the nearest
        existing parent's key, which is where the field should be added. Plain block YAML is
        read from the document's lines (``positions``); the rest is composed.
        """
        found = self._read(index, path, key)
        if found is not None:
            return found
        return self.composed_position(index, path, key=key)

    def _read(self, index: int, path: FieldPath, key: bool) -> tuple[int, int] | None:
        starts = self.document_lines()
        if starts is None or index >= len(starts) or index in self._documents:
            return None
        text = self.document_text(index)
        if ODD.search(text):
            return None
        found = block_position(text.split("\n"), path.steps, key)
        return None if found is None else (starts[index] + found[0] + 1, found[1] + 1)

    def composed_position(self, index: int, path: FieldPath, *, key: bool = False) -> tuple[int, int]:
        """``locate`` from the composed nodes only."""
        node, offset = self.node(index)
        if node is None:
            return 1, 1
        key_node = None
        for step in path.steps:
            child = _child(node, step)
            if child is None:
                break
            key_node, node = child
        else:
            target = key_node if key and key_node is not None else node
            return offset + target.start_mark.line + 1, target.start_mark.column + 1
        target = key_node if key_node is not None else node
        return offset + target.start_mark.line + 1, target.start_mark.column + 1

    def position(self, error: FieldError, index: int) -> FieldError:
        if error.line is not None:
            return error if error.file else error.at(self.name, error.line, error.column)
        on_key = error.extra.get("key") or error.type not in (ErrorType.invalid, ErrorType.not_supported)
        line, column = self.locate(index, error.path, key=on_key)
        return error.at(self.name, line, column)


@dataclass
class Document:
    """One document of a file: its data as loaded, and where it came from."""

    source: FileText
    index: int
    data: Any

    @property
    def name(self) -> str | None:
        meta = self.data.get("metadata") if isinstance(self.data, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        return name if isinstance(name, str) else None


def load_file(
    path: str | os.PathLike[str], display: str | None = None, *, data: bytes | None = None
) -> tuple[list[Document], list[FieldError]]:
    """Read one file. Returns its documents and every error found while loading it.

    ``data``: its bytes, when the caller read them already (at most ``MAX_FILE_BYTES``)."""
    name = display or os.fspath(path)
    if data is not None and len(data) <= msg.MAX_FILE_BYTES:
        return _load_bytes(data, name)
    try:
        data, st = read_file(path, msg.MAX_FILE_BYTES)  # never more than the limit in memory
        if len(data) > msg.MAX_FILE_BYTES:
            size = max(st.st_size, len(data))
            text = (
                f"the file is {size} bytes; a spec file may be at most {msg.MAX_FILE_BYTES} bytes "
                f"({msg.MAX_FILE_BYTES // 2**20} MiB): split it into several files"
            )
            return [], [_file_error(name, text)]
    except OSError as exc:
        return [], [_file_error(name, f"cannot read the file: {exc.strerror or exc}")]
    return _load_bytes(data, name)


def _load_bytes(data: bytes, name: str) -> tuple[list[Document], list[FieldError]]:
    try:  # utf-8-sig's decoder is Python's; without a BOM it is utf-8, errors and all
        text = data.decode("utf-8-sig") if data.startswith(codecs.BOM_UTF8) else data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        message = f"the file is not UTF-8 (byte 0x{data[exc.start]:02x} cannot be decoded): save it as UTF-8"
        return [], [FieldError(ErrorType.file, _ROOT, message, name, line, column)]
    return load_text(text, name, as_json=name.endswith(".json"))


def load_text(
    text: str, name: str, *, as_json: bool = False, split: bool = True
) -> tuple[list[Document], list[FieldError]]:
    """The documents of ``text`` and every error found while loading it (``split``: see ``FileText``)."""
    source = FileText(name, text, json=as_json, split=split)
    if not text or text.isspace():
        return [], [_file_error(name, "the file is empty: a run spec has metadata and spec")]
    if as_json:
        values, error = _load_json(text, name)
    else:
        values, error = _load_yaml(text, source)
    if error is not None:
        return [], [error]
    docs, errors = [], []
    for index, value in enumerate(values):
        if value is None and len(values) > 1:
            continue  # an empty document between separators, as kubectl skips it
        if not isinstance(value, dict):
            what = "empty" if value is None else f"a {_kind(value)}"
            line, column = source.locate(index, _ROOT)
            errors.append(
                FieldError(
                    ErrorType.invalid,
                    _ROOT,
                    f"a run spec must be a mapping with metadata and spec; this document is {what}",
                    name,
                    line,
                    column,
                )
            )
            continue
        docs.append(Document(source, index, value))
    return docs, errors


def _load_yaml(text: str, source: FileText) -> tuple[list[Any], FieldError | None]:
    import yaml_rs

    deep = refused(text, source.name)  # what would nest deep enough to crash yaml-rs
    if deep is not None:
        return [], deep
    try:
        value = yaml_rs.loads(
            text,
            parse_datetime=False,
            alias_limits=yaml_rs.AliasLimits(max_total_replayed_events=msg.MAX_ALIAS_EVENTS),
        )
    except yaml_rs.YAMLDecodeError as exc:
        return [], _yaml_error(str(exc), source)
    if not isinstance(value, list) or not _SEPARATOR.search(text):
        return [value], None  # one document (a list, when it is a list)
    # yaml-rs gives several documents as a list, and one document that is a list as a list too:
    # the document markers say which, and the composer is asked only when the splitter cannot
    # tell (it composes the whole file: a minute for 10 MB of small documents)
    starts = source.document_lines()
    if starts is not None and len(starts) != 1 and len(starts) != len(value):
        import logging  # not at the top: the start-up of validate does without it

        words = "%s: %d documents by their markers, %d by yaml-rs: composing"
        logging.getLogger(__name__).debug(words, source.name, len(starts), len(value))
        source._starts, starts = [], None  # the splitter disagrees with yaml-rs: trust the composer
    count = len(starts) if starts is not None else len(source.nodes())
    if count <= 1:
        return [value], None
    return value, None


def _document_starts(text: str) -> list[int] | None:
    """The 0-based line on which each YAML document of ``text`` starts, as yaml-rs counts them.

    A document starts at a ``---`` line (YAML forbids that line inside any scalar), or, at the
    start of the text and after a ``...`` line, where something other than comments comes before
    the next ``---``. ``None`` for a text with directives (``%YAML``), which the composer reads.
    """
    if _DIRECTIVE.search(text):
        return None
    starts: list[int] = []
    line, at = 0, 0
    bare_from: int | None = 0  # where a document without ``---`` may start
    for m in _MARKER.finditer(text):
        if bare_from is not None and _has_content(text[bare_from : m.start()]):
            starts.append(line + text.count("\n", at, bare_from))
        line += text.count("\n", at, m.start())
        at = m.start()
        if m.group(1) == "---":
            starts.append(line)
            bare_from = None
        else:
            bare_from = text.find("\n", m.start()) + 1 or len(text)
    if bare_from is not None and _has_content(text[bare_from:]):
        starts.append(line + text.count("\n", at, bare_from))
    return starts


def _has_content(text: str) -> bool:
    """Whether ``text`` holds a line that is neither blank nor a comment."""
    return any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines())


def _yaml_error(message: str, source: FileText) -> FieldError:
    name = source.name
    if message.startswith("duplicate mapping key"):
        found = _find_duplicate(source)
        if found is not None:
            return found
    if message.startswith("alias replay limit exceeded"):
        return _file_error(
            name,
            f"YAML aliases expand to more than {msg.MAX_ALIAS_EVENTS} values (an alias bomb?): "
            "write the values out instead",
        )
    m = _YAML_RS_POSITION.search(message)
    reason = message.strip().splitlines()[-1].strip()
    if "tab" in reason:
        reason = f"{reason}: indent with spaces, not tabs"
    line, column = (int(m.group(1)), int(m.group(2))) if m else (1, 1)
    if reason.startswith("simple key expect ':'"):
        # found where the key that lacks its ':' ends (it ran on into the next line): the line a
        # reader points at is the one the key starts on, the line before
        line, column = _line_before(source.text, line)
        reason = "a key without ':' (write 'key: value'; or is this line indented too far?)"
    return FieldError(ErrorType.syntax, _ROOT, f"YAML syntax error: {reason}", name, line, column)


def _line_before(text: str, line: int) -> tuple[int, int]:
    """The last line before ``line`` that holds something but a comment, and its first column."""
    lines = text.splitlines()
    for number in range(min(line - 1, len(lines)), 0, -1):
        stripped = lines[number - 1].strip()
        if stripped and not stripped.startswith("#"):
            return number, len(lines[number - 1]) - len(lines[number - 1].lstrip()) + 1
    return line, 1


def _find_duplicate(source: FileText) -> FieldError | None:
    """The duplicate key yaml-rs found (its message has no position), placed by the composer: in
    a file of several documents, only the document yaml-rs refuses on its own is composed."""
    import yaml_rs

    starts = source.document_lines()
    indexes: Iterable[int] = range(len(starts)) if starts is not None else range(len(source.nodes()))
    for index in indexes:
        if starts is not None and len(starts) > 1:
            try:
                yaml_rs.loads(source.document_text(index), parse_datetime=False)
                continue
            except yaml_rs.YAMLDecodeError:
                pass
        root, offset = source.node(index)
        found = _duplicate_in(root, _ROOT)
        if found is not None:
            path, first, second = found
            return FieldError(
                ErrorType.duplicate,
                path,
                f"duplicate key '{path.last}' (first at line {offset + first.start_mark.line + 1}): "
                "a key may appear once in a mapping",
                source.name,
                offset + second.start_mark.line + 1,
                second.start_mark.column + 1,
            )
    return None


def _duplicate_in(node: Any, path: FieldPath) -> tuple[FieldPath, Any, Any] | None:
    """The first key used twice in a mapping under ``node`` (a key's value is searched before the
    keys after it), its path and both key nodes. Depth-first without recursion (a stack of each
    open node's children): a document may nest thousands of levels (``nesting.MOST``)."""
    pending = [_children(node, path)]
    while pending:
        for child, at in pending[-1]:
            if child is _TWICE:
                return at
            pending.append(_children(child, at))
            break
        else:
            pending.pop()
    return None


#: What ``_children`` gives in place of a child at a key used twice (with the path and both keys).
_TWICE = object()


def _children(node: Any, path: FieldPath) -> Iterator[tuple[Any, Any]]:
    """A composed node's children and their paths, in order; a mapping's stops at a key used twice."""
    from ruamel.yaml.nodes import MappingNode, SequenceNode

    if isinstance(node, MappingNode):
        seen: dict[str, Any] = {}
        for key, value in node.value:
            k = str(key.value)
            if k in seen:
                yield _TWICE, (path.key(k), seen[k], key)
                return
            seen[k] = key
            yield value, path.key(k)
    elif isinstance(node, SequenceNode):
        for i, item in enumerate(node.value):
            yield item, path.index(i)


def _load_json(text: str, name: str) -> tuple[list[Any], FieldError | None]:
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in items:
            if k in out:
                duplicates.append(k)
            out[k] = v
        return out

    try:
        value = json.loads(text, object_pairs_hook=pairs)
    except RecursionError:
        return [], _file_error(name, "JSON nesting is too deep to be a run spec")
    except json.JSONDecodeError as exc:
        message = exc.msg
        before = text[: exc.pos].rstrip()
        if before.endswith(",") and text[exc.pos : exc.pos + 1] in ("}", "]"):
            comma = len(before) - 1
            line = text.count("\n", 0, comma) + 1
            column = comma - (text.rfind("\n", 0, comma) + 1) + 1
            return [], FieldError(
                ErrorType.syntax, _ROOT, "JSON syntax error: trailing comma: remove it", name, line, column
            )
        return [], FieldError(
            ErrorType.syntax, _ROOT, f"JSON syntax error: {message}", name, exc.lineno, exc.colno
        )
    if duplicates:
        found = _find_duplicate(FileText(name, text, json=True))
        if found is not None:
            return [], found
    return [value], None


def _compose(text: str) -> list:
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=False)
    return list(yaml.compose_all(text))


def _child(node: Any, step: str | int) -> tuple[Any, Any] | None:
    from ruamel.yaml.nodes import MappingNode, SequenceNode

    if isinstance(node, MappingNode) and isinstance(step, str):
        for key, value in node.value:
            if str(key.value) == step:
                return key, value
    elif isinstance(node, SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value):
        return None, node.value[step]
    return None


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def _file_error(name: str, message: str) -> FieldError:
    return FieldError(ErrorType.file, _ROOT, message, name, 1, 1)
