"""The commands as a user runs them (in-process), on the fake cluster: exit codes and key lines."""

from __future__ import annotations

import io
import json
import re

import pytest

from reconciler.cli.app import run


@pytest.fixture
def cli(world, monkeypatch, capsys):
    monkeypatch.setattr("reconciler.cli.connect.connect", lambda server, token, **_: world.cluster)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # no terminal

    def call(*argv: str) -> tuple[int, str, str]:
        code = run(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return call


def test_detailed_exitcode(world, cli):
    world.run("a")
    code, out, _ = cli("plan", "-f", "runs", "--source", "s", "--detailed-exitcode")
    assert code == 2 and "+ a  create" in out and "Plan: 1 to create" in out
    assert cli("plan", "-f", "runs", "--source", "s")[0] == 0
    assert cli("apply", "-f", "runs", "--source", "s", "--yes")[0] == 0
    assert cli("plan", "-f", "runs", "--source", "s", "--detailed-exitcode")[0] == 0
    world.write("a.yaml", "metadata: [\n")
    code, out, err = cli("plan", "-f", "runs", "--source", "s", "--detailed-exitcode")
    assert code == 1 and "runs/a.yaml:1:" in err and "nothing was planned" in err


def test_json_output_and_saved_plan(world, cli):
    world.run("a")
    code, out, _ = cli("plan", "-f", "runs", "--source", "s", "-o", "json", "--out", "plan.json")
    assert code == 0
    assert json.loads(out) == json.loads((world.root / "plan.json").read_text())
    assert json.loads(out)["format_version"] == "2"
    code, out, _ = cli("apply", "plan.json", "--yes")
    assert code == 0 and "a: created" in out
    code, _, err = cli("apply", "plan.json", "--yes")
    assert code == 1 and "stale" in err and "run a was created" in err


def test_a_plan_of_format_1_is_still_applied_and_another_refused(world, cli):
    world.run("a")
    code, out, _ = cli("plan", "-f", "runs", "--source", "s", "-o", "json")
    saved = json.loads(out)
    (world.root / "old.json").write_text(json.dumps({**saved, "format_version": "1"}))
    (world.root / "new.json").write_text(json.dumps({**saved, "format_version": "3"}))
    code, _, err = cli("apply", "new.json", "--yes")
    assert code == 1 and "format_version is '3'; this astra reads '1' and '2'" in err
    code, out, _ = cli("apply", "old.json", "--yes")
    assert code == 0 and "a: created" in out


def test_apply_asks_and_refuses_without_a_terminal(world, cli):
    world.run("a")
    code, _, err = cli("apply", "-f", "runs", "--source", "s")
    assert code == 1 and "give --yes" in err
    assert world.cluster.names() == []


def test_dry_run_changes_nothing(world, cli):
    world.run("a")
    code, out, _ = cli("apply", "-f", "runs", "--source", "s", "--dry-run")
    assert code == 0 and "Dry run: nothing was applied." in out
    assert world.cluster.names() == []


def test_watch_once_status_and_force_unlock(world, cli):
    world.run("a")
    code, out, _ = cli("watch", "runs", "--source", "s", "--once")
    assert code == 0 and "s: Ready ReconciliationSucceeded" in out
    lock = world.store.lock("s", "ghost@h:9", 0.0)
    code, out, _ = cli("status")
    assert code == 0 and "Ready" in out and lock.id in out
    code, out, _ = cli("status", "-o", "json")
    assert json.loads(out)[0]["lock"]["owner"] == "ghost@h:9"
    code, out, _ = cli("force-unlock", lock.id)
    assert code == 0 and world.store.read("s").lock is None
    code, _, err = cli("force-unlock", lock.id)
    assert code == 1 and "no source holds lock" in err


def test_a_server_astra_cannot_use_is_one_clear_line(world, capsys):
    world.run("a")
    assert run(["plan", "-f", "runs", "--server", "ftp://x"]) == 1
    said = "cannot use server 'ftp://x': give an http(s):// URL or slurm://[PARTITION]"
    assert capsys.readouterr().err == f"astra: error: {said}\n"


@pytest.mark.parametrize(
    "args",
    [
        ("plan", "-f", "runs", "--source", "s"),
        ("plan", "--file=runs", "--source=s", "-ojson"),
        ("plan", "-f", "runs", "--source", "s", "-v", "--detailed-exitcode"),
        ("plan", "-f", "runs", "--source", "s", "--out", "p.json", "--prune"),
        ("plan", "--source", "s"),
        ("plan", "runs", "--source", "s"),  # paths without -f, as validate takes them
    ],
)
def test_plan_with_plain_arguments_runs_without_typer_and_alike(world, cli, capsys, args):
    from reconciler import cli as cli_package

    world.run("a")
    command, _ = cli_package._fast_call(list(args))
    assert command.__module__ == "reconciler.cli.planning"
    with pytest.raises(SystemExit) as fast:
        cli_package.main(list(args))
    fast_out, fast_err = capsys.readouterr()
    typer_code, typer_out, typer_err = cli(*args)

    def timeless(text: str) -> str:  # a plan's JSON holds the time it was made
        return re.sub(r'"created_at": [0-9.]+', '"created_at": T', text)

    assert fast.value.code == typer_code and fast_err == typer_err
    assert timeless(fast_out) == timeless(typer_out) and (fast_out or "give the run specs" in fast_err)


@pytest.mark.parametrize(
    "args",
    [
        ("apply", "-f", "runs", "--source", "s", "--dry-run"),
        ("apply", "runs", "--source=s", "--dry-run", "-v"),
        ("apply", "-f", "runs", "--source", "s"),  # no terminal to ask on: refused, as typer's
        ("force-unlock", "0123abcd", "--source", "s"),
        ("force-unlock", "0123abcd"),
    ],
)
def test_apply_and_force_unlock_with_plain_arguments_run_without_typer_and_alike(world, cli, capsys, args):
    from reconciler import cli as cli_package

    world.run("a")
    command, _ = cli_package._fast_call(list(args))
    assert command.__module__ == "reconciler.cli.applying"
    with pytest.raises(SystemExit) as fast:
        cli_package.main(list(args))
    fast_out, fast_err = capsys.readouterr()
    typer_code, typer_out, typer_err = cli(*args)
    assert (fast.value.code, fast_out, fast_err) == (typer_code, typer_out, typer_err)
    assert fast_out or fast_err


@pytest.mark.parametrize(
    "args",
    [
        ("plan", "-f", "runs", "--help"),  # --help alone is plain: tests/test_plain_help.py
        ("plan", "-f", "runs", "--sourse", "s"),
        ("plan", "-f", "runs", "-o", "yaml"),
        ("plan", "-f"),
        ("plan", "--prune=yes"),
        ("apply", "-f", "runs", "--settle", "-1"),
        ("apply", "-f", "runs", "--settle", "soon"),
        ("apply", "--yes=no"),
        ("force-unlock",),
        ("force-unlock", "a1", "b2"),
        ("history",),  # a command without a plain route ('status' has one: tests/day2/test_plain_route.py)
    ],
)
def test_anything_but_plain_arguments_goes_to_typer(args):
    from reconciler import cli as cli_package

    assert cli_package._fast_call(list(args)) is None


def test_the_server_and_token_come_from_the_environment_on_both_routes(monkeypatch):
    from reconciler import cli as cli_package

    monkeypatch.setenv("ASTRA_SERVER", "http://example:1")
    monkeypatch.setenv("ASTRA_TOKEN", "t")
    _, options = cli_package._fast_call(["plan", "-f", "runs", "--token", "mine"])
    assert (options.files, options.server, options.token) == (("runs",), "http://example:1", "mine")


@pytest.mark.parametrize("command", ["plan", "validate", "apply", "force-unlock"])
def test_the_plain_parser_knows_exactly_the_options_typer_declares(command):
    """The plain route and typer's command are made from one declaration (``cli.flags``): every
    option, flag, repeatable option, choice, environment variable and positional parameter typer
    declares for the command is one the plain parser reads alike, and nothing else."""
    import enum

    import typer.main

    from reconciler.cli import flags
    from reconciler.cli.app import app

    declared = getattr(typer.main.get_command(app), "commands")[command]  # noqa: B009 (a click group)
    options = {
        "plan": flags.PlanOptions,
        "validate": flags.ValidateOptions,
        "apply": flags.ApplyOptions,
        "force-unlock": flags.UnlockOptions,
    }[command]
    plain = {}
    for name, flag in flags.flags_of(options):
        plain[name] = (tuple(sorted(flag.names)), flag.kind, flag.env, flag.choices)
    wanted = {}
    for p in declared.params:
        choices = p.type_descriptor.annotation  # an Enum: the values it may take
        values = (
            tuple(v.value for v in choices)
            if isinstance(choices, type) and issubclass(choices, enum.Enum)
            else ()
        )
        if p.param_type_name == "argument":
            kind = "args" if p.nargs == -1 else "arg"
        else:
            kind = "flag" if p.is_flag else "list" if p.multiple else "value"
        wanted[p.name] = (
            tuple(sorted([*p.opts, *p.secondary_opts])) if kind not in ("args", "arg") else (),
            kind,
            p.envvar,
            values,
        )
    assert plain == wanted


@pytest.mark.parametrize(
    "listing",
    [("status",), ("source", "list"), ("history", "s"), ("template", "list")],
    ids=" ".join,
)
def test_every_listing_says_the_same_rows_in_json_and_yaml(world, cli, listing):
    from ruamel.yaml import YAML

    world.run("a")
    assert cli("apply", "-f", "runs", "--source", "s", "--yes")[0] == 0
    code, as_json, err = cli(*listing, "-o", "json")
    assert code == 0, err
    code, as_yaml, _ = cli(*listing, "-o", "yaml")
    assert code == 0
    rows = json.loads(as_json)
    assert isinstance(rows, list) and rows
    assert YAML(typ="safe", pure=True).load(as_yaml) == rows


def test_history_says_who_applied_as_user_at_host_and_keeps_the_pid_in_its_json(world, cli):
    import getpass
    import os
    import socket

    world.run("a")
    assert cli("apply", "-f", "runs", "--source", "s", "--yes")[0] == 0
    code, table, err = cli("history", "s")
    assert code == 0, err
    person = f"{getpass.getuser()}@{socket.gethostname()}"
    assert f" {person} " in table and f"{person}:{os.getpid()}" not in table
    code, as_json, _ = cli("history", "s", "-o", "json")
    assert json.loads(as_json)[0]["who"] == f"{person}:{os.getpid()}"  # what is stored: unchanged
