"""``astra COMMAND --help`` of a command with a plain argv route prints what typer's command of
the same options prints, word for word and at every terminal width, without importing typer
(a few hundred milliseconds of start-up; issue 33)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.cli import _PLAIN, main
from reconciler.cli.app import run

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = sorted(_PLAIN)


def _plain(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert ended.value.code == 0
    return capsys.readouterr().out


def _typer(capsys, argv: list[str]) -> str:
    assert run(argv) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("columns", ["80", "60", "132"])
@pytest.mark.parametrize("words", COMMANDS, ids=" ".join)
def test_a_plain_commands_help_is_typers(capsys, monkeypatch, words, columns):
    monkeypatch.setenv("COLUMNS", columns)
    for flag in ("--help", "-h"):
        argv = [*words, flag]
        assert _plain(capsys, argv) == _typer(capsys, argv)


def test_the_help_of_a_read_imports_no_typer():
    code = (
        "import sys\n"
        "from reconciler.cli import main\n"
        "try:\n    main(['get', 'runs', '--help'])\n"
        "except SystemExit:\n    pass\n"
        "print('typer' in sys.modules, 'pydantic' in sys.modules, file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert "Usage: astra get runs [OPTIONS] [names]..." in done.stdout
    assert done.stderr.split() == ["False", "False"]
