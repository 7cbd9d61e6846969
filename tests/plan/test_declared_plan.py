"""The plan's lines for what astra.yaml declares beside the runs (issues 30 and 34): its secrets
(``+ secret NAME``, ``~ secret NAME (changed)``, nothing for an unchanged one, never a value nor
a hash of one) and its alerts (``+``, ``~`` with a quiet diff of fields, ``-`` only with prune
and only of alerts the source declared), in the text, JSON and markdown plans (snapshots)."""

from __future__ import annotations

import dataclasses
import json

from reconciler.loop.declared import alert_rule
from reconciler.plan import plan_from_json, plan_to_json, render_plan
from reconciler.plan.render_markdown import render_markdown
from reconciler.plan.resources import alert_changes, secret_changes

FAILURES = {"sink": {"kind": "slack", "url": "slack-url"}, "events": ["run.failed"], "severity": "error"}


def live_rule(name: str, declared: dict, by: str | None) -> dict:
    """A rule as ``GET /alerts`` answers it."""
    return {
        "name": name,
        "workspace": "default/default",
        **alert_rule(declared, by or "-"),
        "declared_by": by,
    }


def _plan(world, resources, kept=()):
    world.run("train")
    made = world.plan()
    return dataclasses.replace(made, resources=tuple(resources), resources_not_pruned=tuple(kept))


def test_secrets_say_their_names_and_whether_they_change_never_a_value():
    planned = {"hf-token": ("create", []), "wandb": ("update", ["train", "eval"]), "same": ("none", ["x"])}
    made = secret_changes(planned)
    assert [(r.name, r.action, r.reason) for r in made] == [
        ("hf-token", "create", ""),
        ("wandb", "update", "read by train, eval"),
    ]
    assert all(r.after is None and not r.fields for r in made)


def test_alerts_are_created_updated_and_pruned_only_when_this_source_declared_them():
    declared = {
        "failures": alert_rule({**FAILURES, "severity": "warning"}, "team"),
        "new": alert_rule(FAILURES, "team"),
    }
    live = {
        "failures": live_rule("failures", FAILURES, "team"),
        "old": live_rule("old", FAILURES, "team"),
        "by-hand": live_rule("by-hand", FAILURES, None),  # astra alert create
        "theirs": live_rule("theirs", FAILURES, "other-source"),
    }
    kept_run, kept = alert_changes(declared, live, "team", prune=False)
    assert [(r.name, r.action) for r in kept_run] == [("failures", "update"), ("new", "create")]
    assert kept == ["old"]
    [update] = [r for r in kept_run if r.action == "update"]
    assert [(f.path, f.before, f.after) for f in update.fields] == [("severity", "error", "warning")]
    pruned, kept = alert_changes(declared, live, "team", prune=True)
    assert [(r.name, r.action) for r in pruned] == [
        ("failures", "update"),
        ("new", "create"),
        ("old", "delete"),
    ]
    assert kept == []
    same, _ = alert_changes({"failures": alert_rule(FAILURES, "team")}, live, "team", prune=False)
    assert same == []  # unchanged: not in the plan


def _resources():
    planned = {"hf-token": ("create", []), "wandb": ("update", ["train"]), "steady-key": ("none", [])}
    secrets = secret_changes(planned)
    declared = {
        "failures": alert_rule({**FAILURES, "severity": "warning"}, "test"),
        "pager": alert_rule(FAILURES, "test"),
    }
    live = {"failures": live_rule("failures", FAILURES, "test"), "old": live_rule("old", FAILURES, "test")}
    alerts, _ = alert_changes(declared, live, "test", prune=True)
    return [*secrets, *alerts]


def test_the_text_plan_lists_secrets_and_alerts_after_the_runs(world, snapshot):
    made = _plan(world, _resources())
    text = render_plan(plan_to_json(made))
    assert "+ secret hf-token\n~ secret wandb (changed; read by train)\n" in text
    assert '~ alert failures\n    severity: "error" -> "warning"\n' in text
    assert "- alert old" in text and "steady-key" not in text
    runs = "Plan: 1 to create, 0 to update, 0 to replace, 0 to delete"
    assert text.endswith(f"{runs}; secrets and alerts: 2 to create, 2 to update, 1 to delete.\n")
    assert text == snapshot


def test_the_json_plan_holds_the_resources_and_reads_back(world, snapshot):
    made = _plan(world, _resources(), kept=("kept-alert",))
    data = plan_to_json(made)
    assert plan_to_json(plan_from_json(json.loads(json.dumps(data)))) == data
    assert {k: data[k] for k in ("resources", "resources_not_pruned")} == snapshot
    assert "Alerts no longer in astra.yaml, kept (add --prune to delete): kept-alert" in render_plan(data)


def test_the_markdown_plan_lists_them_in_a_diff_block(world, snapshot):
    data = plan_to_json(_plan(world, _resources()))
    assert render_markdown(data) == snapshot


def test_a_plan_that_only_sets_a_secret_has_changes(world):
    world.run("train")
    world.converge()
    made = dataclasses.replace(world.plan(), resources=tuple(secret_changes({"hf-token": ("update", [])})))
    assert made.has_changes
    text = render_plan(plan_to_json(made))
    assert "No changes" not in text and "~ secret hf-token (changed)" in text, text
