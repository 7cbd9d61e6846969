"""The scenario corpus: plan (text and JSON) and apply output, snapshot-tested with a fixed clock.

Each scenario also asserts what matters about it directly; the snapshots keep the words stable.
"""

from __future__ import annotations

import json

import pytest

from reconciler.apply import apply_plan
from reconciler.load import load_source
from reconciler.plan import Action, plan_from_json, plan_to_json
from reconciler.reconcile import LoadFailed, StalePlan, make_plan

from .conftest import NOW, apply_text, as_json, as_text


def outputs(plan, verbose=False):
    return {"text": as_text(plan, verbose), "json": as_json(plan)}


def actions(plan):
    return {c.address: c.action for c in plan.changes}


def test_create(world, snapshot):
    world.run("train", gpus=8)
    world.sweep("sweep")
    plan = world.plan()
    assert actions(plan) == {"sweep": Action.create, "train": Action.create}
    result = world.apply(plan)
    assert result.ok and world.cluster.names() == ["sweep", "train"]
    assert {**outputs(plan), "apply": apply_text(result)} == snapshot


def test_noop(world, snapshot):
    world.run("train")
    world.sweep("sweep")
    world.converge()
    plan = world.plan()
    assert not plan.has_changes
    assert actions(plan) == {"sweep": Action.noop, "train": Action.noop}
    assert {**outputs(plan), "verbose": as_text(plan, verbose=True)} == snapshot


def test_update_in_place(world, snapshot):
    world.sweep("sweep", parallel=2)
    world.converge()
    version = world.cluster.get_run("sweep").resource_version
    world.write(
        "sweep.yaml",
        (world.root / "runs/sweep.yaml")
        .read_text()
        .replace("name: sweep", "name: sweep\n  labels: {team: a}")
        .replace("max_parallel: 2", "max_parallel: 4"),
    )
    plan = world.plan()
    (change,) = plan.changes
    assert change.action is Action.update and change.forces_replace == ()
    result = world.apply(plan)
    assert [e.outcome for e in result.entries] == ["configured"]
    assert world.cluster.get_run("sweep").resource_version > version
    assert world.cluster.calls.count(("delete", "sweep")) == 0
    assert {**outputs(plan), "apply": apply_text(result)} == snapshot


def test_replace_of_a_running_run_says_what_it_stops(world, snapshot):
    world.run("train", gpus=32)
    world.converge()
    world.cluster.start("train", workers=4, gpus=8, started_at=NOW - (2 * 3600 + 13 * 60))
    world.run("train", gpus=32, image="python:3.13")
    plan = world.plan(replace=["train"])  # --replace train: not held
    (change,) = plan.changes
    assert change.action is Action.replace
    assert change.forces_replace == ("spec.task_template.image",)
    assert (change.cost.workers, change.cost.gpus) == (4, 32)
    text = as_text(plan)
    assert "stops 4 workers and 32 GPUs that had run for 2h 13m" in text
    assert "# forces replace" in text
    result = world.apply(plan)
    assert [e.outcome for e in result.entries] == ["replaced"]
    assert world.cluster.document("train")["spec"]["task_template"]["image"] == "python:3.13"
    assert {**outputs(plan), "apply": apply_text(result)} == snapshot


def test_rerun_of_a_finished_run(world, snapshot):
    world.run("train")
    world.sweep("sweep")
    world.converge()
    world.cluster.finish("train", "Completed", at=NOW - 3 * 3600)
    world.cluster.finish("sweep", "Failed", at=NOW - 600)
    world.run("train", image="python:3.13")
    plan = world.plan()
    assert actions(plan) == {"sweep": Action.noop, "train": Action.replace}
    train = next(c for c in plan.changes if c.address == "train")
    assert train.reason == "reruns"
    assert "reruns: the run Completed 3h ago" in as_text(plan)
    assert outputs(plan, verbose=True) == snapshot


def test_drift_is_shown_apart(world, snapshot):
    world.sweep("sweep", parallel=2)
    world.run("train")
    world.converge()
    world.cluster.edit("sweep", lambda d: d["spec"]["array"].__setitem__("max_parallel", 9))
    world.cluster.edit("train", lambda d: d["spec"]["task_template"].__setitem__("image", "evil:1"))
    plan = world.plan()
    assert actions(plan) == {"sweep": Action.update, "train": Action.replace}
    assert all(f.drift for c in plan.changes for f in c.fields)
    text = as_text(plan)
    assert "Drift: changed on the cluster since the last apply" in text
    assert world.apply(plan).ok
    assert not world.plan().has_changes
    assert outputs(plan) == snapshot


def test_deleted_out_of_band_is_planned_back(world):
    world.run("train")
    world.converge()
    world.cluster.remove("train")
    plan = world.plan()
    (change,) = plan.changes
    assert change.action is Action.create and "planned back" in change.reason


def test_prune(world, snapshot):
    world.run("keep")
    world.run("old", gpus=2)
    world.converge()
    world.cluster.start("old", workers=1, gpus=2, started_at=NOW - 300)
    world.cluster.create_run(  # someone else's run: never ours to prune
        {"metadata": {"name": "theirs"}, "spec": {"task_template": {"image": "x"}}}
    )
    (world.root / "runs/old.yaml").unlink()
    kept = world.plan()
    assert kept.changes[0].action is Action.noop and kept.not_pruned == ("old",)
    pruned = world.plan(prune=True)
    assert actions(pruned) == {"keep": Action.noop, "old": Action.delete}
    result = world.apply(pruned)
    assert world.cluster.names() == ["keep", "theirs"]
    assert "old" not in world.store.read("test").inventory
    assert {"kept": as_text(kept), **outputs(pruned), "apply": apply_text(result)} == snapshot


def test_prune_refused_on_a_broken_file(world, snapshot):
    world.run("a")
    world.run("b")
    world.converge()
    world.write("a.yaml", "metadata: {name: a}\nspec: {task_template: {image: x}, arrray: {}}\n")
    (world.root / "runs/b.yaml").unlink()
    with pytest.raises(LoadFailed) as failed:
        world.plan(prune=True)
    assert world.cluster.names() == ["a", "b"]
    lines = [e.format() for e in failed.value.errors]
    assert lines == ["runs/a.yaml:2:35: spec.arrray: unknown field 'arrray'; did you mean 'array'?"]
    assert {"errors": lines, "message": str(failed.value)} == snapshot


def test_prune_of_everything_needs_allow_empty(world):
    world.run("a")
    world.converge()
    (world.root / "runs/a.yaml").unlink()
    from reconciler.plan import PlanError

    with pytest.raises(PlanError, match="delete every run of source 'test'"):
        world.plan(prune=True)
    assert world.plan(prune=True, allow_empty=True).count(Action.delete) == 1


def test_stale_saved_plan(world, snapshot):
    world.run("train")
    world.sweep("sweep")
    world.converge()
    world.run("train", image="python:3.13")
    saved = json.loads(as_json(world.plan()))
    # the files change after the plan
    world.run("train", image="python:3.14")
    with pytest.raises(StalePlan) as by_file:
        world.apply(plan_from_json(saved))
    # the cluster changes after the plan
    world.run("train", image="python:3.13")
    world.cluster.edit("sweep", lambda d: d["metadata"].setdefault("labels", {}).update(x="y"))
    with pytest.raises(StalePlan) as by_run:
        world.apply(plan_from_json(saved))
    assert world.cluster.document("train")["spec"]["task_template"]["image"] == "python:3.12"
    assert world.store.read("test").lock is None
    assert {"files": str(by_file.value), "cluster": str(by_run.value)} == snapshot


def test_saved_plan_is_carried_out_exactly(world):
    world.run("train")
    world.converge()
    world.run("train", image="python:3.13")
    saved = json.loads(as_json(world.plan()))
    world.cluster.calls.clear()
    result = world.apply(plan_from_json(saved))
    assert result.ok
    assert [c for c in world.cluster.calls if c[0] in ("create", "update", "delete")] == [
        ("delete", "train"),
        ("create", "train"),
    ]


def test_name_clash_names_both_files(world, snapshot):
    world.run("train", file="a.yaml")
    world.run("train", file="nested/b.yaml")
    with pytest.raises(LoadFailed) as failed:
        world.plan()
    lines = [e.format() for e in failed.value.errors]
    assert len(lines) == 1 and "runs/a.yaml" in lines[0] and lines[0].startswith("runs/nested/b.yaml:2:9:")
    assert lines == snapshot


TEMPLATE = """\
metadata:
  name: job
  description: a test template
parameters:
  image: {type: string, default: "python:3.12"}
  gpus: {type: integer, default: 1}
spec:
  task_template:
    image: "{{ image }}"
    command: python
    requested_resources:
      gpu_requests:
        count: "{{ gpus }}"
"""


def test_a_template_change_ripples_to_three_runs(world, monkeypatch, snapshot):
    folder = world.root / "tpl"
    folder.mkdir()
    (folder / "job.yaml").write_text(TEMPLATE)
    monkeypatch.setenv("ASTRA_TEMPLATE_PATH", "tpl")
    for name in ("one", "two", "three"):
        world.write(f"{name}.yaml", f"metadata: {{name: {name}}}\ntemplate: {{name: job}}\n")
    world.write("own.yaml", "metadata: {name: own}\ntemplate: {name: job, parameters: {image: 'x:1'}}\n")
    world.converge()
    assert not world.plan().has_changes
    (folder / "job.yaml").write_text(TEMPLATE.replace('default: "python:3.12"', 'default: "python:3.13"'))
    plan = world.plan()
    assert actions(plan) == {
        "one": Action.replace,
        "own": Action.noop,
        "three": Action.replace,
        "two": Action.replace,
    }
    assert "tpl/job.yaml" in plan.files
    assert outputs(plan) == snapshot


def test_apply_result_json(world, snapshot):
    world.run("a")
    plan = world.plan()
    result = apply_plan(plan, world.cluster, world.store, now=lambda: NOW, who="t")
    assert result.to_json() == snapshot
    assert plan_to_json(plan)["summary"] == {"create": 1, "delete": 0, "noop": 0, "replace": 0, "update": 0}


def test_load_failure_is_never_an_empty_desired_set(world):
    world.run("a")
    world.converge()
    world.write("a.yaml", "metadata: [\n")
    source = world.source(prune=True, allow_empty=True)
    loaded = load_source(source.paths)
    assert not loaded.ok and loaded.runs == {}
    with pytest.raises(LoadFailed):
        make_plan(source, loaded, world.cluster, world.store, NOW)
    assert world.cluster.names() == ["a"]
