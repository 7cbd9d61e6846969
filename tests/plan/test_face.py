"""The package's face: ``import reconciler`` gives load, validate, plan and apply, each in one call,
and importing it costs nothing of them until one is used."""

from __future__ import annotations

import subprocess
import sys

import reconciler


def test_every_public_name_is_there_and_documented():
    for name in reconciler.__all__:
        value = getattr(reconciler, name)
        assert name == "__version__" or value.__doc__, name
    assert sorted(dir(reconciler)) == sorted(reconciler.__all__)


def test_importing_the_package_imports_none_of_its_parts():
    parts = "sorted(m for m in sys.modules if m.startswith(('reconciler.', 'pydantic')))"
    code = f"import sys, reconciler; print({parts})"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_validate_plan_and_apply_in_one_call_each(world):
    world.run("a")
    world.write("bad.yaml", "metadata: {name: bad}\nspec: {task_template: {image: 1}}\n")
    checked = reconciler.validate(["runs"])
    assert [e.file for e in checked.errors] == ["runs/bad.yaml"] and checked.documents == 2
    (world.root / "runs" / "bad.yaml").unlink()
    source = reconciler.Source("face", ("runs",))
    loaded = reconciler.load_source(source.paths)
    plan = reconciler.plan_source(source, world.cluster, world.store, world.now)
    assert isinstance(plan, reconciler.Plan) and loaded.ok and plan.summary["create"] == 1
    done = reconciler.apply_source(source, world.cluster, world.store)
    assert done.ok and world.cluster.names() == ["a"]
    assert not reconciler.plan_source(source, world.cluster, world.store, world.now).has_changes
