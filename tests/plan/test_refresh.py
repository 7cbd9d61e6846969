"""``refresh``: the watch loop's load of the changed files only is the load of the whole folder.

Each case changes a source's files, then compares ``refresh(before, changed)`` with a fresh
``load_source`` of the same folder: the runs (names, documents, files), the problems, the
files' order and the revision. The pass that keeps every file and every name (one file edited)
must take the short way: the runs of the files that did not change are not looked at again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from reconciler.load import load_source, refresh
from reconciler.load import source as source_module

SPEC = "metadata:\n  name: {name}\nspec:\n  task_template:\n    image: {image}\n"


def write(folder: Path, file: str, *names: str, image: str = "python:3.12") -> str:
    path = folder / file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("---\n".join(SPEC.format(name=n, image=image) for n in names), encoding="utf-8")
    return str(path)


def view(loaded) -> dict:
    return {
        "runs": {n: (r.file, r.document) for n, r in loaded.runs.items()},
        "errors": [e.format() for e in loaded.errors],
        "files": list(loaded.files),
        "revision": loaded.revision,
        "file_of": loaded.file_of,
        "templated": loaded.templated,
    }


@pytest.fixture
def source(tmp_path):
    folder = tmp_path / "runs"
    for i in range(5):
        write(folder, f"team-{i % 2}/r{i}.yaml", f"r{i}")
    write(folder, "pair.yaml", "p1", "p2")
    return folder


def edit_image(folder: Path) -> list[str]:
    return [write(folder, "team-1/r3.yaml", "r3", image="python:3.13")]


def rename_a_run(folder: Path) -> list[str]:
    return [write(folder, "pair.yaml", "p1", "p3")]


def add_a_file(folder: Path) -> list[str]:
    return [write(folder, "team-0/a-new.yaml", "new")]


def delete_a_file(folder: Path) -> list[str]:
    gone = folder / "team-0" / "r2.yaml"
    gone.unlink()
    return [str(gone)]


def clash_with_another_file(folder: Path) -> list[str]:
    return [write(folder, "team-1/r1.yaml", "r0")]


def break_a_file(folder: Path) -> list[str]:
    path = folder / "team-1" / "r1.yaml"
    path.write_text("metadata:\n  name: r1\nspec: [\n", encoding="utf-8")
    return [str(path)]


@pytest.mark.parametrize(
    "change", [edit_image, rename_a_run, add_a_file, delete_a_file, clash_with_another_file, break_a_file]
)
def test_a_refresh_is_the_load_of_the_whole_folder(source, change):
    before = load_source([str(source)])
    assert before.ok
    changed = change(source)
    assert view(refresh(before, changed)) == view(load_source([str(source)]))


@pytest.mark.parametrize(
    "change", [edit_image, rename_a_run, add_a_file, delete_a_file, clash_with_another_file, break_a_file]
)
def test_a_refresh_of_a_load_that_was_planned_is_the_load_of_the_whole_folder(source, change):
    before = load_source([str(source)])
    said = before.revision  # as a watch's pass says it and plans: the refresh starts from
    assert before.file_of  # what they made once
    changed = change(source)
    after = refresh(before, changed)
    assert after.revision != said
    assert view(after) == view(load_source([str(source)]))


def test_the_revision_is_the_hash_of_the_files_hashes_templates_and_options(source):
    loaded = load_source([str(source)])
    text = json.dumps([loaded.hashes(), loaded.templates, loaded.template, list(loaded.sets)], sort_keys=True)
    assert loaded.revision == hashlib.sha256(text.encode()).hexdigest()


def test_fixing_a_broken_file_is_seen_by_the_refresh(source):
    broken = load_source([str(source)])
    broken = refresh(broken, break_a_file(source))
    assert not broken.ok
    fixed = refresh(broken, [write(source, "team-1/r1.yaml", "r1")])
    assert fixed.ok
    assert view(fixed) == view(load_source([str(source)]))


def test_an_edit_that_keeps_every_name_does_not_gather_every_file_again(source, monkeypatch):
    before = load_source([str(source)])
    ways = []  # each refresh's finish: whether it took the short way (``finish`` says)
    original = source_module.finish
    monkeypatch.setattr(source_module, "finish", lambda *a, **k: ways.append(original(*a, **k)) or ways[-1])
    after = refresh(before, edit_image(source))
    assert ways == [True]  # the short way: the runs of the other files not gathered again
    assert after.runs["r3"].document["spec"]["task_template"]["image"] == "python:3.13"
    assert list(after.runs) == list(before.runs)
    refresh(after, add_a_file(source))
    assert ways == [True, False]  # a new file: every name is gathered and checked again
