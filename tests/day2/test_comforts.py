"""The usual comforts: ``--version``, shell completion, colour on a terminal (none with NO_COLOR
or when piped)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from reconciler import __version__
from reconciler.cli.colour import enabled

from .test_get_describe import applied

ASTRA = str(Path(sys.executable).parent / "astra")


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_version_on_both_routes(cli):
    done = subprocess.run([ASTRA, "--version"], capture_output=True, text=True, check=True)
    assert done.stdout == f"astra {__version__}\n"
    assert cli("--version") == (0, f"astra {__version__}\n", "")
    assert cli("-V")[1] == done.stdout


def test_shell_completion_completes_commands_and_subcommands(tmp_path):
    env = {**os.environ, "_ASTRA_COMPLETE": "complete_bash", "COMP_CWORD": "2", "COMP_WORDS": "astra get r"}
    done = subprocess.run([ASTRA], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert (done.returncode, done.stdout.split()) == (0, ["runs"])
    script = subprocess.run([ASTRA, "--show-completion", "bash"], capture_output=True, text=True)
    assert "_ASTRA_COMPLETE=complete_bash" in script.stdout
    assert "--install-completion" in subprocess.run([ASTRA, "--help"], capture_output=True, text=True).stdout


def test_colour_only_on_a_terminal_without_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert enabled(Tty()) and not enabled(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not enabled(Tty())
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert not enabled(Tty())


def test_plan_validate_and_get_are_coloured_on_a_terminal_and_plain_when_piped(world, cli, monkeypatch):
    applied(world, cli)
    world.run("new")
    world.write("bad.yaml", "metadata: {name: bad}\nspec: {lifetime: Forever}\n")
    plain = {"plan": cli("plan", "-f", "runs/new.yaml", "--source", "x")[1], "get": cli("get", "runs")[1]}
    plain["validate"] = cli("validate", "runs/bad.yaml")[1]
    assert "\033[" not in "".join(plain.values())
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr("reconciler.cli.colour.enabled", lambda stream=None: True)
    plan = cli("plan", "-f", "runs/new.yaml", "--source", "x")[1]
    assert "\033[32m+ new  create" in plan and "\033[1mPlan: 1 to create" in plan
    got = cli("get", "runs")[1]
    assert "\033[33mPending\033[0m" in got
    assert got.replace("\033[33m", "").replace("\033[0m", "") == plain["get"]  # the same columns
    bad = cli("validate", "runs/bad.yaml")[1]
    assert bad.startswith("\033[1mruns/bad.yaml:") and "\033[31m" in bad
