"""The reads typed all day by both ways into them: the plain argv route (``cli/__init__.py``, no
typer) and typer's commands made of the same options (``flags``): the same output, the same
errors, the same exit codes; and what is not plain (``--help``, a bad ``--since``) goes to typer."""

from __future__ import annotations

import pytest

from reconciler import cli as entry

from .test_get_describe import applied

CASES = [
    ("get", "runs"),
    ("get", "runs", "-o", "wide"),
    ("get", "runs", "-o", "json", "-l", "team=nlp"),
    ("get", "runs", "-o", "yaml", "train", "tagged"),
    ("get", "runs", "--state", "Running", "--state", "pending"),
    ("get", "runs", "nosuch"),
    ("get", "runs", "-l", "team"),
    ("get", "workers", "sweep"),
    ("get", "workers", "sweep", "-o", "json"),
    ("get", "workers", "nosuch"),
    ("describe", "run", "sweep"),
    ("describe", "run", "nosuch"),
    ("logs", "sweep"),
    ("logs", "sweep", "--all", "--tail", "1"),
    ("logs", "sweep-1", "--tail", "0"),
    ("logs", "nosuch"),
    ("status",),
    ("status", "-o", "json"),
    ("source", "list"),
    ("source", "list", "-o", "yaml"),
]


@pytest.mark.parametrize("argv", CASES, ids=" ".join)
def test_the_plain_route_says_what_typer_says(world, cli, capsys, argv):
    applied(world, cli)
    world.cluster.start("sweep", workers=2, gpus=1)
    world.cluster.set_log("sweep-0", "copy 0\nstep 1\n")
    world.cluster.set_log("sweep-1", "copy 1\n")
    assert entry._fast_call(list(argv)) is not None  # the plain route takes it
    through_typer = cli(*argv)
    with pytest.raises(SystemExit) as ended:
        entry.main(list(argv))
    out, err = capsys.readouterr()
    assert (ended.value.code, out, err) == through_typer


@pytest.mark.parametrize(
    "argv",
    [
        ("get", "runs", "-o", "json", "--help"),  # --help alone is plain: tests/test_plain_help.py
        ("get", "runs", "-o", "tsv"),
        ("logs", "sweep", "--since", "yesterday"),
        ("logs", "sweep", "--tail", "-1"),
        ("describe", "run"),
        ("get", "workers", "a", "b"),
        ("status", "--wat"),
    ],
    ids=" ".join,
)
def test_what_is_not_plain_goes_to_typer(argv):
    assert entry._fast_call(list(argv)) is None
