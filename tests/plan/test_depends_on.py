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


def test_validate_on_every_core_finds_the_same_dependency_errors(world):
    """Over ``PARALLEL_FROM`` files, validate checks them on every core (a cold process, so
    that it may fork): each chunk gives its files' ``depends_on`` back, and the cycle and the
    unknown run are said as one process says them. A file with no valid run is not looked at
    for its dependencies, in both."""
    import subprocess
    import sys

    from reconciler.check import PARALLEL_FROM

    _chain(world, ("a", ["b"]), ("b", ["c"]), ("c", ["a"]), ("d", ["nowhere"]))
    world.write("bad.yaml", "metadata: {name: bad}\nspec: {depends_on: [{run: ghost}]}\n")
    for i in range(PARALLEL_FROM):
        world.write(f"many/r{i:04d}.yaml", CHAIN.format(name=f"r{i:04d}", deps="lifetime: Batch"))
    alone = [e.format() for e in check(["runs"], parallel=False).errors]
    argv = [sys.executable, "-m", "reconciler.cli", "validate", "runs"]
    cold = subprocess.run(argv, capture_output=True, text=True, check=False)
    said = cold.stdout + cold.stderr
    assert cold.returncode == 1, said
    assert [e for e in alone if "depends_on" in e] == [
        "runs/a.yaml:3:22: spec.depends_on[0].run: runs a → b → c → a wait for each other: a cycle",
        "runs/d.yaml:3:22: spec.depends_on[0].run: no run named 'nowhere' among the files given: "
        "depends_on names a run of the same files",
    ]
    for line in alone:
        assert line.split(": ", 2)[-1] in said, (line, said)
    assert "ghost" not in said and "ghost" not in " ".join(alone)
