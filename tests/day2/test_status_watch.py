"""``astra status`` and ``astra watch`` say what they did: Ready with the revision after an apply,
the runs each pass created, updated, replaced and deleted, and every problem of a broken file."""

from __future__ import annotations

import random

from reconciler.loop import Reconciler

from .test_get_describe import commit


def loop(world):
    return Reconciler(
        world.source(prune=True),
        world.cluster,
        world.store,
        clock=lambda: world.now,
        who="loop@h:1",
        cache=world.cache,
        rng=random.Random(1),
    )


def test_a_pass_names_the_runs_it_created_updated_replaced_and_deleted(world):
    for name in ("a", "b", "c", "d"):
        world.run(name)
    r = loop(world)
    assert (
        r.reconcile_once()["message"]
        == "applied: 4 created (a, b, c, d), 0 updated, 0 replaced, 0 deleted, 0 unchanged"
    )
    world.sweep("a", parallel=3)  # a different shape: a replace
    (world.root / "runs" / "d.yaml").unlink()
    world.run("e")
    assert r.reconcile_once()["message"] == (
        "applied: 1 created (e), 0 updated, 1 replaced (a), 1 deleted (d), 2 unchanged"
    )


def test_a_broken_file_s_every_problem_is_said_and_a_missing_worker_template_is_a_validation_problem(world):
    world.write("a.yaml", "metadata: {name: a}\nspec: {lifetime: Forever}\n")
    status = loop(world).reconcile_once()
    assert (status["state"], status["reason"]) == ("Stalled", "ValidationFailed")
    assert status["message"].startswith("2 problems: runs/a.yaml:")
    assert "spec.task_template: a run needs a worker template" in status["message"]
    assert "spec.lifetime:" in status["message"]


def test_a_template_that_is_not_there_is_a_render_problem(world):
    world.write("a.yaml", "metadata: {name: a}\ntemplate: {name: nowhere}\nspec: {}\n")
    status = loop(world).reconcile_once()
    assert (status["state"], status["reason"]) == ("Stalled", "RenderFailed")


def test_status_after_an_apply_is_ready_with_the_revision_applied(world, cli):
    world.run("a")
    sha = commit(world)
    assert cli("apply", "-f", "runs", "--source", "s", "--yes")[0] == 0
    code, out, _ = cli("status")
    assert code == 0
    header, row = out.splitlines()
    assert header.split()[:3] == ["SOURCE", "STATE", "REASON"]
    assert row.split()[:4] == ["s", "Ready", "ReconciliationSucceeded", f"main@sha1:{sha[:7]}"]
