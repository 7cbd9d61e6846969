"""Hostile trees: folders nested as deep as paths allow are walked, not a ``RecursionError``.

A repository may hold a folder 1,500 levels deep (git has no limit; Linux paths allow about
2,000 one-letter levels). Both walks astra makes over the files, the load's and the quick
plan's, go depth-first without recursion, in the same order as before.
"""

from __future__ import annotations

import os
from pathlib import Path

from reconciler.cli.quickgit import _tree
from reconciler.runspec.validate import find_files

LEVELS = 1_500  # past Python's recursion limit (1,000)
RUN = "metadata: {name: deep}\nspec:\n  task_template: {image: busybox}\n"


def _deep_tree(top: Path, deep_folders) -> str:
    """``top/a/a/…/a/run.yaml``, ``LEVELS`` folders deep, beside ``top/b.yaml`` and ``top/z/c.yaml``."""
    (top / "z").mkdir()
    (top / "z" / "c.yaml").write_text(RUN)
    (top / "b.yaml").write_text(RUN)
    return deep_folders(top, "a", LEVELS, "run.yaml", RUN)


def test_the_load_finds_a_spec_nested_past_the_recursion_limit_in_name_order(tmp_path, deep_folders):
    deepest = _deep_tree(tmp_path, deep_folders)
    files, errors = find_files([tmp_path])
    assert errors == []
    assert files == [deepest, str(tmp_path / "b.yaml"), str(tmp_path / "z" / "c.yaml")]


def test_the_quick_plan_stats_every_entry_of_such_a_tree_in_name_order(tmp_path, deep_folders):
    _deep_tree(tmp_path, deep_folders)
    tree = _tree([str(tmp_path)])
    assert tree is not None
    names = [os.path.relpath(name, tmp_path) for name, _ in tree]
    assert names[:3] == [".", "a", "a/a"]
    assert len(names) == 1 + LEVELS + 1 + 3  # the top, each folder, the deep run, b, z, c
    assert names[-3:] == ["b.yaml", "z", "z/c.yaml"]
