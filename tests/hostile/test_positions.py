"""Positions read from a document's lines are the composer's, or not given at all.

``astra validate`` places every warning and error at ``file:line:column``. Plain block YAML is
read from its lines (``reconciler.runspec.positions``), everything else is composed with
ruamel.yaml; here both answer for every path of every document (the corpus, the examples, the
shipped templates, and generated YAML in every style the walk reads and many it leaves to the
composer), and the walk must say the composer's position or nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.runspec.loading import FileText, load_text
from reconciler.runspec.paths import FieldPath
from reconciler.runspec.positions import ODD, block_position

ROOT = Path(__file__).resolve().parents[2]


def paths(node: Any, at: tuple = ()) -> list[tuple]:
    """Every path of a composed node, a missing child of each mapping and sequence, and a step
    of the wrong kind."""
    from ruamel.yaml.nodes import MappingNode, SequenceNode

    out = [at]
    if isinstance(node, MappingNode):
        out += [(*at, "no-such-key"), (*at, 0)]
        for key, value in node.value:
            out += paths(value, (*at, str(key.value)))
    elif isinstance(node, SequenceNode):
        out += [(*at, len(node.value)), (*at, "key")]
        for i, item in enumerate(node.value):
            out += paths(item, (*at, i))
    else:
        out.append((*at, "below-a-scalar"))
    return out


def disagreements(text: str) -> list[tuple]:
    """Where the walk says something else than the composer, in every document of ``text``."""
    source = FileText("x.yaml", text)
    starts = source.document_lines() or []
    wrong = []
    for index in range(len(starts)):
        node, _ = source.node(index)
        document = source.document_text(index)
        if node is None or ODD.search(document):
            continue
        for steps in paths(node):
            for key in (True, False):
                found = block_position(document.split("\n"), steps, key)
                if found is None:
                    continue
                read = (starts[index] + found[0] + 1, found[1] + 1)
                composed = source.composed_position(index, FieldPath(steps), key=key)
                if read != composed:
                    wrong.append((index, steps, key, read, composed))
    return wrong


def files() -> list[Path]:
    found = [*ROOT.glob("tests/corpus/**/*.yaml"), *ROOT.glob("examples/**/*.yaml")]
    return sorted(found + list(ROOT.glob("templates/**/*.yaml")))


def test_the_walk_places_every_path_of_the_corpus_examples_and_templates_as_the_composer():
    read = 0
    for file in files():
        text = file.read_bytes().decode("utf-8-sig", errors="replace")
        assert disagreements(text) == [], file
        source = FileText(str(file), text)
        read += sum(
            block_position(source.document_text(i).split("\n"), (), True) is not None
            for i in range(len(source.document_lines() or []))
        )
    assert read > 50  # the walk reads most of them: a walk that gives up on everything passes too


def test_a_warning_is_placed_where_it_was_before():
    text = "---\nmetadata:\n  name: a\nspec:\n  array: {size: 2}\n  task_template:\n    image: x\n"
    docs, _ = load_text(text * 3, "many.yaml")
    at = FieldPath(("spec", "task_template", "time_limit_seconds"))
    assert [d.source.locate(d.index, at, key=True) for d in docs] == [(6, 3), (13, 3), (20, 3)]


# ---- generated YAML: block, compact, indentless, flow, quoted, block scalars, comments --------

KEYS = st.sampled_from(["a", "b", "spec", "x-y", "k.z", "1", "true", "image", "_n"])
PLAIN = st.sampled_from(["x", "busybox", "12", "a b", "it's", 'say "hi"', "a#b", "-1", "~", "a:b"])
QUOTED = st.sampled_from(["'x'", "'it''s'", '"a\\"b"', '"#: x"', "'a # b'", '"multi', "'open"])
FLOW = st.sampled_from(
    ["{a: 1, b: [x, 'y']}", "[]", "{}", "[a, {b: c}]", "[--seed, '1']", "{a: 'b", "[a, # c"]
)
ODDITIES = st.sampled_from(["&anchor x", "*anchor", "!tag x", "? x", "- x", "|\n", "a: b"])


@st.composite
def block(draw: st.DrawFn, depth: int = 0) -> Any:
    """A value: (kind, content)."""
    choices = ["scalar", "quoted", "flow", "literal", "null"]
    if depth < 3:
        choices += ["map", "map", "seq"]
    kind = draw(st.sampled_from(choices))
    if kind == "map":
        keys = draw(st.lists(KEYS, min_size=1, max_size=4, unique=True))
        return "map", [(k, draw(block(depth + 1))) for k in keys]
    if kind == "seq":
        return "seq", draw(st.lists(block(depth + 1), min_size=1, max_size=3))
    if kind == "literal":
        return "literal", draw(st.sampled_from(["|", ">-", "|+", "|2"]))
    content = {"scalar": PLAIN, "quoted": QUOTED, "flow": FLOW, "null": st.just("")}[kind]
    return kind, draw(content)


def write(value: tuple, indent: int, step: int, draw: st.DrawFn) -> list[str]:
    """The lines of a mapping's or a sequence's members at ``indent``."""
    kind, content = value
    pad = " " * indent
    lines: list[str] = []
    if draw(st.booleans()) and draw(st.booleans()):
        lines.append(pad + draw(st.sampled_from(["# a comment", "#", ""])))
    if kind == "map":
        for key, sub in content:
            lines += _member(f"{pad}{key}:", sub, indent, step, draw, indentless=True)
    else:
        for sub in content:
            lines += _member(f"{pad}-", sub, indent, step, draw, indentless=False)
    return lines


def _member(head: str, value: tuple, indent: int, step: int, draw: st.DrawFn, indentless: bool) -> list[str]:
    kind, content = value
    comment = draw(st.sampled_from(["", "", " # note", " #: x"]))
    if kind in ("scalar", "quoted", "flow"):
        if draw(st.integers(0, 30)) == 0:
            return [f"{head} {draw(ODDITIES)}"]
        return [f"{head} {content}{comment}"]
    if kind == "null":
        return [head + comment]
    if kind == "literal":
        body = " " * (indent + step)
        return [f"{head} {content}{comment}", f"{body}key: not a key", "", f'{body}  - "open', f"{body}end"]
    if head.endswith("-") and kind == "map" and draw(st.booleans()):  # compact: - key: value
        inner = write(value, indent + 2, step, draw)
        first = next((i for i, line in enumerate(inner) if line.strip() and not line.strip().startswith("#")))
        return [*inner[:first], head + inner[first][len(head) :], *inner[first + 1 :]]
    deeper = indent if (kind == "seq" and indentless and draw(st.booleans())) else indent + step
    return [head + comment, *write(value, deeper, step, draw)]


@st.composite
def documents(draw: st.DrawFn) -> str:
    docs = []
    for _ in range(draw(st.integers(1, 3))):
        root = (
            "map",
            draw(st.lists(st.tuples(KEYS, block(1)), min_size=1, max_size=4, unique_by=lambda kv: kv[0])),
        )
        lines = write(root, draw(st.sampled_from([0, 0, 1])), draw(st.integers(1, 4)), draw)
        docs.append("\n".join(lines) + "\n")
    first = draw(st.sampled_from(["", "---\n", "# head\n---\n"]))
    return first + "".join(
        f"---{draw(st.sampled_from(['', ' # c']))}\n{d}" if i else d for i, d in enumerate(docs)
    )


@settings(max_examples=400, deadline=None)
@given(documents())
def test_the_walk_places_generated_yaml_as_the_composer_or_leaves_it(text):
    assert disagreements(text) == []
