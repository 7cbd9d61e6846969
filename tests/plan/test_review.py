"""Plans for review: the markdown plan (a pull request's comment) as a snapshot, and the CI
examples, whose every astra command exists with the flags it gives."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from reconciler.plan import plan_to_json
from reconciler.plan.render_markdown import render_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_the_markdown_plan(world, snapshot):
    world.run("keep")
    world.run("retag")
    world.sweep("sweep", parallel=2)
    world.run("gone")
    world.converge()
    world.sweep("steady", parallel=3)
    world.converge()
    world.cluster.edit("steady", lambda d: d["spec"]["array"].__setitem__("max_parallel", 9))  # drift
    world.run("retag", image="python:3.13")
    world.sweep("sweep", parallel=4)
    (world.root / "runs" / "gone.yaml").unlink()
    world.run("new", gpus=2)
    plan = world.plan(prune=True)
    data = plan_to_json(plan)
    data["revision"] = {
        "id": "main@sha1:3f8a8190000000000000000000000000000000aa",
        "subject": "Bump the sweep | and retag",
        "rollback": True,
        "dirty": False,
    }
    assert render_markdown(data) == snapshot


def _commands(ci: Path) -> list[list[str]]:
    data = yaml.safe_load(ci.read_text())
    found = []

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("run", "script") and isinstance(value, str | list):
                    for line in [value] if isinstance(value, str) else value:
                        found.append(line)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(data)
    out = []
    for line in found:
        for part in line.replace("||", "&&").split("&&"):
            words = shlex.split(part.split(">")[0])
            if words and words[0] == "astra":
                out.append(words[1:])
    return out


@pytest.mark.parametrize("name", [".github/workflows/astra.yml", ".gitlab-ci.yml"])
def test_the_ci_examples_run_astra_commands_that_exist_with_those_flags(name):
    import typer.main

    from reconciler.cli.app import app

    commands = getattr(typer.main.get_command(app), "commands")  # noqa: B009 (a click group)
    ran = _commands(ROOT / "examples" / "ci" / name)
    assert {c[0] for c in ran} >= {"validate", "apply"} and any(c[0] == "plan" for c in ran)
    for words in ran:
        command = commands[words[0]]
        flags = {o for p in command.params for o in [*p.opts, *p.secondary_opts]}
        given = [w.split("=")[0] for w in words[1:] if w.startswith("-")]
        assert set(given) <= flags, (name, words, set(given) - flags)
        ctx = command.make_context(
            words[0], list(words[1:]), resilient_parsing=False
        )  # parses as astra would
        assert ctx.params
