"""``astra plan/apply --replace RUN``: a run the files hold unchanged, planned as a replace (fake cluster)."""

from __future__ import annotations

import json
import time


def test_replace_plans_an_unchanged_run_again_and_apply_carries_it_out(world, cli, snapshot):
    world.run("a")
    world.run("b")
    assert cli("apply", "-f", "runs", "--source", "s", "--yes")[0] == 0
    world.cluster.start(
        "a", workers=2, gpus=8, started_at=time.time() - 2 * 3600 - 60
    )  # the plan's clock is real
    code, out, _ = cli("plan", "-f", "runs", "--source", "s", "--detailed-exitcode")
    assert code == 0  # unchanged files: nothing to do
    code, out, _ = cli("plan", "-f", "runs", "--source", "s", "--replace", "a", "--detailed-exitcode")
    assert code == 2 and out == snapshot
    assert "Plan: 0 to create, 0 to update, 1 to replace, 0 to delete." in out
    saved = json.loads(cli("plan", "-f", "runs", "--source", "s", "--replace", "a", "-o", "json")[1])
    assert [(c["address"], c["action"]) for c in saved["changes"] if c["action"] != "noop"] == [
        ("a", "replace")
    ]
    before = world.cluster.get_run("a")
    code, out, _ = cli("apply", "-f", "runs", "--source", "s", "--replace", "a", "--yes")
    assert code == 0 and "a: replaced" in out
    again = world.cluster.get_run("a")
    assert again.state == "Pending" and again.resource_version > before.resource_version
    assert world.cluster.get_run("b").resource_version < before.resource_version  # b untouched


def test_replace_of_a_run_the_files_do_not_hold_is_one_line(world, cli):
    world.run("a")
    code, _, err = cli("plan", "-f", "runs", "--source", "s", "--replace", "zz")
    assert (code, err) == (1, "astra: error: --replace zz: the files hold no run zz\n")
