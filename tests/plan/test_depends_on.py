"""A chain of runs in one folder: validate refuses an unknown run or a cycle among the files,
and the plan says who waits for whom; one apply makes them all (the cluster holds each run until
the one it waits for has ended: tests/controlplane/test_dependencies.py)."""

from __future__ import annotations

from reconciler.check import check
from reconciler.plan import Action

from .conftest import as_text

CHAIN = """\
metadata: {{name: {name}}}
spec:
  {deps}
  task_template: {{image: busybox, command: sh, args: [-c, "true"]}}
"""


def _chain(world, *pairs):
    for name, deps in pairs:
        runs = ", ".join("{run: " + d + "}" for d in deps)
        line = f"depends_on: [{runs}]" if deps else "lifetime: Batch"
        world.write(f"{name}.yaml", CHAIN.format(name=name, deps=line))


def test_the_plan_makes_a_chain_in_one_apply_and_says_who_waits_for_whom(world):
    _chain(world, ("preprocess", []), ("train", ["preprocess"]), ("evaluate", ["train"]))
    plan = world.plan()
    assert {c.address: c.action for c in plan.changes} == dict.fromkeys(
        ["evaluate", "preprocess", "train"], Action.create
    )
    text = as_text(plan)
    assert "+ train  create  (runs/train.yaml)\n    waits for: preprocess (Completed)\n" in text
    assert "+ evaluate  create  (runs/evaluate.yaml)\n    waits for: train (Completed)\n" in text
    assert world.converge().ok and world.cluster.names() == ["evaluate", "preprocess", "train"]


def test_validate_names_an_unknown_run_and_a_cycle_among_the_files(world):
    _chain(world, ("a", ["b"]), ("b", ["c"]), ("c", ["a"]), ("d", ["nowhere"]))
    said = [e.format() for e in check(["runs"], parallel=False).errors]
    assert said == [
        "runs/a.yaml:3:22: spec.depends_on[0].run: runs a → b → c → a wait for each other: a cycle",
        "runs/d.yaml:3:22: spec.depends_on[0].run: no run named 'nowhere' among the files given: "
        "depends_on names a run of the same files",
    ]
