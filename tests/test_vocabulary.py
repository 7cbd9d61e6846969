"""The shared vocabulary: which changes a run takes in place, and the one backoff."""

from __future__ import annotations

from reconciler.runspec.vocabulary import backoff_seconds, changed_paths, validate_update


def run(**spec):
    return {"metadata": {"name": "a"}, "spec": {"array": {"size": 4, "max_parallel": 1}, **spec}}


def test_in_place_fields_pass_and_others_are_named():
    old = run(priority=1)
    assert validate_update(old, {**run(priority=5), "metadata": {"name": "a", "labels": {"t": "x"}}}) == []
    new = run()
    new["spec"]["array"] = {"size": 8, "max_parallel": 2}
    new["spec"]["lifetime"] = "Batch"
    errors = validate_update(old, new)
    assert {e.type for e in errors} == {"forbidden"}
    assert sorted(str(e.path) for e in errors) == ["spec.array.size", "spec.lifetime"]
    assert "spec.array.size cannot change on a run in place" in errors[0].message


def test_a_rename_is_refused_in_its_own_words():
    (error,) = validate_update(run(), {**run(), "metadata": {"name": "b"}})
    assert str(error.path) == "metadata.name" and "cannot be renamed" in error.message


def test_changed_paths_are_the_deepest_keys_and_whole_lists():
    old = {"spec": {"task_template": {"args": ["a"], "env": {"A": "1"}}}}
    new = {"spec": {"task_template": {"args": ["b"], "env": {"A": "1", "B": "2"}}}}
    paths = [str(p) for p in changed_paths(old, new)]
    assert paths == ["spec.task_template.args", "spec.task_template.env.B"]


def test_the_seeds_backoff():
    assert [backoff_seconds(n) for n in range(1, 8)] == [10, 20, 40, 80, 160, 300, 300]
