"""Hostile trees: folders nested as deep as paths allow are walked, not a ``RecursionError``.

A repository may hold a folder 1,500 levels deep (git has no limit; Linux paths allow about
2,000 one-letter levels). The load's walk over the files goes depth-first without recursion, in
name order.
"""

from __future__ import annotations

from pathlib import Path

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
