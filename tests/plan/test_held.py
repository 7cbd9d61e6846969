"""A replace of a run that holds workers waits for the run to end (``plan.held``), unless
``--replace RUN`` or ``spec.replace: Immediately`` (a Service's default) says otherwise."""

from __future__ import annotations

from reconciler.applied import ready_status
from reconciler.plan import Action, plan_from_json, plan_to_json

from .conftest import NOW, as_text

GF_TRAIN = """\
metadata:
  name: gf-train
spec:
  {extra}
  task_template:
    image: python:3.12
    command: python
    args: [train.py, {word}]
    requested_resources:
      gpu_requests:
        count: 16
"""


def _gf(world, word: str, extra: str = "lifetime: Batch") -> None:
    world.write("gf-train.yaml", GF_TRAIN.format(word=word, extra=extra))


def _running(world) -> None:
    _gf(world, "--fast")
    world.converge()
    world.cluster.start("gf-train", workers=2, gpus=8, started_at=NOW - (3 * 3600 + 12 * 60))


def test_a_change_of_a_running_runs_args_is_held_and_apply_stops_nothing(world):
    _running(world)
    _gf(world, "--faster")
    plan = world.plan()
    assert [(c.address, c.action) for c in plan.changes] == [("gf-train", Action.noop)]
    assert [(c.address, c.action) for c in plan.held] == [("gf-train", Action.replace)]
    assert not plan.has_changes
    assert as_text(plan) == (
        "Source test on fake://test\n"
        "\n"
        "-/+ gf-train  replace, held: gf-train is Running (3h12m, 16 GPUs); it will be replaced when it ends"
        "  (runs/gf-train.yaml)\n"
        '    spec.task_template.args[1]: "--fast" -> "--faster"  # forces replace\n'
        "\n"
        "Nothing to do now: 1 replace is held until the run ends (--replace RUN: at once).\n"
        "\n"
        "Plan: 0 to create, 0 to update, 0 to replace, 0 to delete.\n"
    )
    assert plan_to_json(plan_from_json(plan_to_json(plan))) == plan_to_json(plan)
    before = world.cluster.get_run("gf-train")
    result = world.converge(plan=plan)
    assert ("delete", "gf-train") not in world.cluster.calls
    assert world.cluster.get_run("gf-train").resource_version == before.resource_version
    assert world.cluster.document("gf-train")["spec"]["task_template"]["args"] == ["train.py", "--fast"]
    assert [e.outcome for e in result.entries] == ["unchanged"]
    assert ready_status(plan, NOW)["held"] == [
        {
            "run": "gf-train",
            "message": "gf-train is Running (3h12m, 16 GPUs); it will be replaced when it ends",
        }
    ]


def test_the_held_replace_is_carried_out_once_the_run_ends(world):
    _running(world)
    _gf(world, "--faster")
    world.converge()
    world.cluster.finish("gf-train", "Completed", at=NOW + 60)
    world.now = NOW + 120
    plan = world.plan()
    assert plan.held == ()
    (change,) = plan.changes
    assert (change.action, change.reason) == (Action.replace, "reruns")
    result = world.converge(plan=plan)
    assert [e.outcome for e in result.entries] == ["replaced"]
    assert world.cluster.document("gf-train")["spec"]["task_template"]["args"] == ["train.py", "--faster"]
    world.cluster.finish("gf-train", "Completed", at=NOW + 600)
    world.now = NOW + 900
    again = world.plan()  # a finished run whose spec is unchanged is never re-created
    assert [c.action for c in again.changes] == [Action.noop] and again.held == ()


def test_replace_asked_or_immediately_or_a_service_is_not_held(world):
    _running(world)
    _gf(world, "--faster")
    assert [c.action for c in world.plan(replace=["gf-train"]).changes] == [Action.replace]
    _gf(world, "--faster", extra="replace: Immediately")
    assert [c.action for c in world.plan().changes] == [Action.replace]
    _gf(world, "--faster", extra="lifetime: Service")
    assert [c.action for c in world.plan().changes] == [Action.replace]


def test_changing_the_policy_alone_is_in_place(world):
    _running(world)
    _gf(world, "--fast", extra="replace: Immediately")
    (change,) = world.plan().changes
    assert change.action is Action.update and change.forces_replace == ()


def test_a_running_arrays_max_parallel_is_updated_in_place_never_held(world):
    world.sweep("sweep", parallel=2)
    world.converge()
    world.cluster.start("sweep", workers=2, gpus=1, started_at=NOW - 600)
    world.sweep("sweep", parallel=4)
    plan = world.plan()
    assert [c.action for c in plan.changes] == [Action.update] and plan.held == ()


def test_a_pending_run_holds_nothing_and_is_replaced_at_once(world):
    _gf(world, "--fast")
    world.converge()
    _gf(world, "--faster")
    plan = world.plan()
    assert [c.action for c in plan.changes] == [Action.replace] and plan.held == ()
