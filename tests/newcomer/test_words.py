"""Small things a newcomer reads: counts in the right number, a YAML mistake at the line a reader
points at, an OS error in words (never a class name), a home that cannot be made said so."""

from __future__ import annotations

import pytest

from reconciler.cli.app import run


@pytest.fixture
def cli(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)

    def call(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = run(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return call


GOOD = "metadata: {name: %s}\nspec: {task_template: {image: x, command: run, time_limit_seconds: 60}}\n"


def test_counts_are_in_the_right_number(cli, tmp_path):
    (tmp_path / "one.yaml").write_text(GOOD % "one")
    assert cli("validate", "one.yaml") == (0, "", "1 document in 1 file is valid\n")
    (tmp_path / "two.yaml").write_text(GOOD % "two" + "---\n" + GOOD % "three")
    assert cli("validate", ".")[2] == "3 documents in 2 files are valid\n"


def test_a_key_without_its_colon_is_reported_on_its_own_line(cli, tmp_path):
    (tmp_path / "bad.yaml").write_text(
        "metadata:\n  name: x\nspec:\n  task_template:\n    image: x\n    command python\n\n    args: []\n"
    )
    code, out, _ = cli("validate", "bad.yaml")
    assert code == 1
    assert out == (
        "bad.yaml:6:5: YAML syntax error: a key without ':' (write 'key: value'; or is this line "
        "indented too far?)\n"
    )


def test_an_os_error_is_said_in_words(cli, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ASTRA_HOME", "/proc/nope")
    code, _, err = cli("plan", "-f", ".")
    assert code == 1
    assert err == (
        "astra: error: cannot use /proc/nope as astra's home: No such file or directory "
        "(set ASTRA_HOME to a folder you can write)\n"
    )
    monkeypatch.delenv("ASTRA_HOME")
    from reconciler.clusters.fake import FakeCluster

    monkeypatch.setattr("reconciler.cli.connect.connect", lambda server, token, **_: FakeCluster())
    (tmp_path / "one.yaml").write_text(GOOD % "one")
    from reconciler import cli as cli_package

    argv = ["plan", "one.yaml", "--out", "/proc/nope/p.json", "--source", "s"]
    code, _, err = cli(*argv)  # typer's route
    assert code == 1
    assert err == "astra: error: /proc/nope/p.json: No such file or directory\n"
    code = cli_package._guarded(*cli_package._fast_call(argv))  # the plain route
    err = capsys.readouterr().err
    assert code == 1
    assert err == "astra: error: /proc/nope/p.json: No such file or directory\n"


def test_astra_help_shows_the_first_sentence_of_each_command_whole(cli):
    code, out, _ = cli("--help")
    assert code == 0
    commands = out.split("Commands:\n", 1)[1]
    assert "..." not in commands
    flat = " ".join(commands.split())
    assert "validate Check run specs against the published schema and rules, reporting every problem " in flat
    assert "delete Cancel runs (their workers are stopped now) and delete them " in flat


def test_every_group_s_help_shows_the_first_sentence_of_each_of_its_commands_whole(cli):
    from reconciler.cli.app import app

    groups = sorted({g.name for g in app.registered_groups if g.name})
    assert {"get", "source", "secret", "server"} <= set(groups)
    for group in groups:
        code, out, _ = cli(group, "--help")
        assert code == 0, group
        commands = out.split("Commands:\n", 1)[1]
        assert "..." not in commands, (group, commands)
    flat = " ".join(cli("source", "--help")[1].split())
    assert "delete Forget a source: what it applied (its inventory), its status and its history " in flat
