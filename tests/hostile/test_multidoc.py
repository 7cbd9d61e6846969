"""Files of many documents: as fast per document as separate files, and the same answers.

One 10 MB file of 93,793 small documents took 57 s and 1 GB: the loader composed the whole file
with ruamel.yaml only to tell several documents from one document that is a list. Now the
document markers tell, and only a failing document's own lines are composed for its positions
(``Source.split``). The plain path (compose the whole file, ``split=False``) stays as the twin
every answer is held to; the speed is ``task bench --only multidoc``'s figure.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import assume, given
from hypothesis import strategies as st

from reconciler.check import check
from reconciler.runspec import loading
from reconciler.runspec.loading import load_text
from reconciler.runspec.paths import FieldPath
from reconciler.runspec.validate import validate_data

GOOD = "metadata:\n  name: {name}\nspec:\n  array: {{size: 2}}\n  task_template:\n    image: busybox\n"
BAD = [
    "metadata:\n  name: {name}\nspec:\n  array: {{size: 0}}\n  task_template:\n    image: busybox\n",
    "metadata:\n  name: {name}\nspec:\n  task_template:\n    imagee: busybox\n",
    "# a comment first\nmetadata: {{name: {name}}}\nspec: {{task_template: {{image: '', args: [1]}}}}\n",
    "- a list\n- is not a run spec\n",
    "metadata:\n  name: {name}\nspec:\n  task_template:\n    image: x\n"
    "    args:\n      - |\n        echo\n        ---\n    time_limit_seconds: soon\n",
]


def documents(n: int, every: int = 7) -> list[str]:
    """``n`` documents, each its own text starting with ``---``; every ``every``-th one is bad."""
    docs = []
    for i in range(n):
        body = BAD[(i // every) % len(BAD)] if i % every == every - 1 else GOOD
        docs.append("---\n" + body.format(name=f"run-{i:05d}"))
    return docs


def problems(*paths: Path) -> list[tuple[str, str, int | None, int | None]]:
    done = check([str(p) for p in paths], parallel=False)
    return [(str(e.path), e.message, e.line, e.column) for e in done.errors]


def test_a_file_of_many_documents_says_what_they_say_as_separate_files(tmp_path):
    docs = documents(400)
    one = tmp_path / "all.yaml"
    one.write_text("".join(docs))
    folder = tmp_path / "each"
    folder.mkdir()
    expected = []
    line = 0
    for i, doc in enumerate(docs):
        part = folder / f"{i:05d}.yaml"
        part.write_text(doc)
        expected += [(path, message, at + line, column) for path, message, at, column in problems(part)]
        line += doc.count("\n")
    together = problems(one)
    assert len(together) >= 50
    assert sorted(together) == sorted(expected)


def test_only_the_failing_document_is_composed_for_its_position(tmp_path, monkeypatch):
    docs = documents(2000, every=10_000)
    docs[1500] = "---\n" + BAD[0].format(name="run-01500")
    path = tmp_path / "all.yaml"
    path.write_text("".join(docs))
    composed: list[str] = []
    compose = loading._compose
    monkeypatch.setattr(loading, "_compose", lambda text: composed.append(text) or compose(text))
    start = sum(d.count("\n") for d in docs[:1500])
    # its fifth line: ``---``, metadata, name, spec, array
    assert problems(path) == [("spec.array.size", "array.size must be from 1 to 10000", start + 5, 17)]
    assert composed == [docs[1500]]


def test_a_duplicate_key_in_one_document_is_placed_by_that_document_alone(tmp_path, monkeypatch):
    docs = documents(1000, every=10_000)
    docs[700] = "---\nmetadata:\n  name: x\n  name: y\nspec: {}\n"
    path = tmp_path / "all.yaml"
    path.write_text("".join(docs))
    composed: list[str] = []
    compose = loading._compose
    monkeypatch.setattr(loading, "_compose", lambda text: composed.append(text) or compose(text))
    start = sum(d.count("\n") for d in docs[:700])
    ((where, message, line, column),) = problems(path)
    assert (where, line, column) == ("metadata.name", start + 4, 3)
    assert message.startswith(f"duplicate key 'name' (first at line {start + 3})")
    assert composed == [docs[700]]


# ---- the splitter against the composer, on texts hypothesis makes ----------------------------

PIECES = [
    "---\n",
    "--- # a comment on the marker\n",
    "...\n",
    "# a comment\n",
    "\n",
    "metadata: {name: a}\nspec: {task_template: {image: x}}\n",
    "metadata:\n  name: b\nspec:\n  task_template:\n    imagee: x\n",
    "- a\n- list\n",
    "--- {metadata: {name: c}, spec: {}}\n",
    "--- [1, 2]\n",
    "just a scalar\n",
    "key: |\n  text\n  ---\n  ...\n",
]


@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=12))
def test_the_document_markers_count_as_the_composer_does(pieces):
    """Wherever the composer reads the whole file (it refuses a leading ``...``, which yaml-rs
    and the splitter read), both paths give the same documents and the same positions."""
    text = "".join(pieces)
    try:
        loading._compose(text)
    except Exception:  # ruamel's own errors: the plain path has no positions to compare
        assume(False)
    fast, fast_errors = load_text(text, "f.yaml")
    plain, plain_errors = load_text(text, "f.yaml", split=False)
    assert [(d.index, d.data) for d in fast] == [(d.index, d.data) for d in plain]
    assert fast_errors == plain_errors
    root = FieldPath.root()
    for d, p in zip(fast, plain, strict=True):  # every position, on keys and on values
        errors = validate_data(d.data)
        assert [d.source.position(e, d.index) for e in errors] == [
            p.source.position(e, p.index) for e in errors
        ]
        for path in (root, root.child("metadata", "name"), root.child("spec")):
            assert d.source.locate(d.index, path, key=True) == p.source.locate(p.index, path, key=True)
