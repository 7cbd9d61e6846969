"""Hostile nesting: YAML deep enough to crash yaml-rs is refused before it reads it.

yaml-rs recurses once a level with no limit in block context: 20,000 levels of ``- - - …`` (40
kB) ended ``astra validate`` with a segfault, no words at all. Each case runs the CLI in a
process of its own, so that a crash is a failed test, not a lost test run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml_rs

from reconciler.controlplane.server import ServerError, load_inventory_file
from reconciler.runspec import messages as msg
from reconciler.runspec import nesting
from reconciler.runspec.loading import FileText, load_text
from reconciler.runspec.nesting import FLOW, MOST, refused
from reconciler.runspec.validate import validate_data

DEEP = 20_000  # levels: past what crashes yaml-rs on an 8 MiB stack (about 12,000)
RUN = "metadata: {name: deep}\nspec:\n  task_template: {image: busybox}\n"


def _validate(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "reconciler.cli", "validate", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def _alias_chain(levels: int, links: int) -> str:
    """Anchors each replaying the one before under ``levels`` more levels: no line is long, the
    nesting comes from the replays."""
    lines = ["a0: &a0", "- " * levels + "x"]
    for k in range(1, links):
        lines += [f"a{k}: &a{k}", "- " * levels + f"*a{k - 1}"]
    return "\n".join(lines) + "\n"


SHAPES = {
    "compact sequences on one line": ("- " * DEEP + "x\n", 1, 65, "[0]" * msg.DEPTH_MAX),
    "explicit keys on one line": ("? " * DEEP + "x\n", 1, 65, ".".join(["?"] * msg.DEPTH_MAX)),
    "a mapping then compact sequences": ("a:\n  " + "- " * DEEP + "x\n", 2, 65, "a" + "[0]" * 31),
    "alias replays of short lines": (_alias_chain(900, 8), 10, 63, "a4" + "[0]" * 31),
}


@pytest.mark.parametrize("shape", SHAPES, ids=list(SHAPES))
def test_nesting_past_what_yaml_rs_survives_is_refused_in_the_limits_words(tmp_path, shape):
    text, line, column, path = SHAPES[shape]
    bad = tmp_path / "deep.yaml"
    bad.write_text(text)
    out = _validate(str(bad))
    assert out.returncode == 1, out.returncode  # a crash is -11
    assert out.stdout == f"{bad}:{line}:{column}: {path}: {msg.TOO_DEEP}\n"
    assert out.stderr == "1 problem in 1 of 1 files\n"


def test_the_refusal_names_the_same_node_as_the_limits_do():
    """Block mappings one column deeper each line, past ``MOST`` but short of a crash: refused
    before yaml-rs reads them, with what ``limits`` says when yaml-rs reads them anyway (here it
    can, in this test's own process)."""
    text = "".join(" " * i + "k:\n" for i in range(MOST + 1_000))
    (said,) = validate_data(yaml_rs.loads(text))
    line, column = FileText("blk.yaml", text).locate(0, said.path)
    docs, errors = load_text(text, "blk.yaml")
    assert docs == [] and errors == [said.at("blk.yaml", line, column)]
    assert (line, column, said.message) == (33, 33, msg.TOO_DEEP)


def test_yaml_rs_refuses_deep_flow_collections_itself():
    """What the bound counts on: flow nesting past ``FLOW`` is yaml-rs' own error."""
    for opening, closing in (("[", "]"), ("{a: ", "}")):
        for before in ("", "a: ", "- " * 10):
            yaml_rs.loads(before + opening * (FLOW - 1) + closing * (FLOW - 1))
            with pytest.raises(yaml_rs.YAMLDecodeError, match="recursion limit"):
                yaml_rs.loads(before + opening * FLOW + closing * FLOW)


def _levels(text: str) -> int:
    """How many collections the deepest node of ``text`` is in (libyaml's events, counted)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.events import CollectionEndEvent, CollectionStartEvent

    deepest = level = 0
    for event in YAML(typ="safe", pure=False).parse(text):
        if isinstance(event, CollectionStartEvent):
            level += 1
            deepest = max(deepest, level)
        elif isinstance(event, CollectionEndEvent):
            level -= 1
    return deepest


WORST = {
    "compact sequences": "- " * 300 + "x\n",
    "explicit keys": "? " * 300 + "x\n",
    "a sequence as a mapping's value, at its column": "k:\n"
    + "".join("  " * i + "- k:\n" for i in range(150))
    + "  " * 150
    + "- x\n",
    "a mapping on the line after a dash": "".join(
        " " * i + "-\n" + " " * (i + 1) + "k:\n" for i in range(150)
    )
    + " " * 151
    + "x\n",
}


@pytest.mark.parametrize("shape", WORST, ids=list(WORST))
def test_block_nesting_is_at_most_twice_the_longest_line(shape):
    """The bound ``refused`` takes from a text's lines, on the shapes that nest the most per
    column; yaml-rs reads each as libyaml does."""
    text = WORST[shape]
    longest = max(map(len, text.split("\n")))
    yaml_rs.loads(text)
    assert 150 <= _levels(text) <= 2 * (longest + 1)


LEGIT = {
    "a 5,000-character value": RUN.replace("image: busybox", "image: busybox, command: " + "x" * 5_000),
    "anchors and aliases": "metadata: {name: deep, labels: &l {team: a}}\n"
    "spec:\n  task_groups:\n  - {name: a, replicas: 1, task_template: &t {image: busybox}}\n"
    "  - {name: b, replicas: 1, task_template: *t}\n",
}


@pytest.mark.parametrize("case", LEGIT, ids=list(LEGIT))
def test_texts_a_bound_cannot_clear_load_as_yaml_rs_reads_them(case):
    text = LEGIT[case]
    assert len(text) > 1_900 or ("&" in text and "*" in text)  # the events are read
    assert refused(text, "ok.yaml") is None
    docs, errors = load_text(text, "ok.yaml")
    assert errors == [] and [d.data for d in docs] == [yaml_rs.loads(text)]


def test_a_shell_commands_ampersands_and_glob_are_no_anchor_and_alias(monkeypatch):
    """``&&`` and ``*`` inside scalars: the lines' bound clears the text, no parse is made."""
    text = RUN.replace(
        "task_template: {image: busybox}",
        "task_template:\n    image: busybox\n    command: [sh, -c, 'cd /data && ls *.parquet']\n"
        "    env: {GLOB: /data/*.csv, AND: a && b}",
    )

    parsed: list[str] = []
    monkeypatch.setattr("reconciler.runspec.nesting._scan", lambda text, name: parsed.append(name))
    assert refused(text, "shell.yaml") is None and parsed == []
    assert refused("a: &x 1\nb: [*x]\n", "aliases.yaml") is None and parsed == ["aliases.yaml"]


def test_a_text_libyaml_cannot_read_is_refused_in_its_words_when_the_bound_cannot_clear_it():
    text = "a: &x [1, *x\nb: " + "y" * 4_000 + "\n"
    found = refused(text, "bad.yaml")
    assert found is not None and found.message.startswith("YAML syntax error: ")
    assert (found.line, found.column) == (2, 1)


def test_a_deep_set_value_is_refused_on_the_command_line(tmp_path):
    (tmp_path / "run.yaml").write_text(RUN)
    out = _validate(".", "--set", "args=" + "- " * DEEP + "x", cwd=tmp_path)
    assert out.returncode == 1, out.returncode  # a crash is -11
    assert out.stdout.startswith("<command line>: template.parameters.args: --set args=- - ")
    assert out.stdout.endswith(f"- x: the value {msg.TOO_DEEP}\n")


def test_a_deep_inventory_file_is_an_error_with_words(tmp_path):
    deep = tmp_path / "inventory.yaml"
    deep.write_text("machines:\n" + "- " * 2_000 + "x\n")
    with pytest.raises(ServerError, match="nests too deeply to be an inventory"):
        load_inventory_file(deep)


def test_a_key_used_twice_deep_in_a_document_is_placed_without_recursion():
    """yaml-rs says only that a key is used twice; the composed nodes are searched for where,
    2,000 levels down (past Python's recursion limit, within ``MOST``)."""
    text = "b:\n  " + "- " * 2_000 + "{a: 1, a: 2}\n"
    docs, (error,) = load_text(text, "twice.yaml")
    assert docs == [] and (error.line, error.column) == (2, 4010)
    assert str(error.path) == "b" + "[0]" * 2_000 + ".a"
    assert error.message == "duplicate key 'a' (first at line 2): a key may appear once in a mapping"


PLACES = [
    "a: &x 1\nb: *x\n",
    "- &x 1\n- *x\n",
    "[&x 1, *x]\n",
    "{a: &x 1, b: *x}\n",
    '{"a":&x 1, "b":*x}\n',
    "? &x a\n: *x\n",
    "--- &x\na: 1\n",
    "a: !!str &x b\nc: *x\n",
    "&x a: 1\nb: *x\n",
    "a:\n  &x\n  - 1\nb:\n\t*x\n",
    "a: [\n  &x 1,\n  *x]\n",
    "- - - &x 1\n  - *x\n",
]


@pytest.mark.parametrize("text", PLACES)
def test_every_anchor_and_alias_is_found_where_a_node_may_start(text):
    """What the lines' bound leans on: a text whose anchors and aliases it does not find
    replays nothing (each place where YAML lets a node carry one, as libyaml reads it)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.events import AliasEvent, NodeEvent

    events = list(YAML(typ="safe", pure=False).parse(text.replace("\t", "  ")))
    anchors = [e for e in events if isinstance(e, NodeEvent) and not isinstance(e, AliasEvent) and e.anchor]
    aliases = [e for e in events if isinstance(e, AliasEvent)]
    assert anchors and nesting._ANCHOR.search(text)
    assert not aliases or nesting._ALIAS.search(text)
