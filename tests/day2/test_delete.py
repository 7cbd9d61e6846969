"""``astra delete`` as a user meets it (fake cluster)."""

from __future__ import annotations

import io

from .test_get_describe import applied


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_delete_says_which_source_brings_a_run_back_and_asks(world, cli, monkeypatch, snapshot):
    applied(world, cli)
    world.cluster.create_run({"metadata": {"name": "by-hand"}, "spec": {"task_template": {"image": "x"}}})
    monkeypatch.setattr("sys.stdin", Terminal("no\n"))
    code, out, err = cli("delete", "train", "by-hand")
    assert (code, err) == (1, "astra: error: nothing was deleted: the answer was not 'yes'\n")
    assert out == snapshot
    assert world.cluster.names() == ["by-hand", "sweep", "tagged", "train"]
    monkeypatch.setattr("sys.stdin", Terminal("yes\n"))
    code, out, _ = cli("delete", "train", "by-hand")
    assert code == 0 and out.endswith("train: deleted\nby-hand: deleted\n")
    assert world.cluster.names() == ["sweep", "tagged"]


def test_delete_without_a_terminal_needs_yes_and_every_run_must_exist(world, cli):
    applied(world, cli)
    code, _, err = cli("delete", "train")
    assert (code, err) == (1, "astra: error: no terminal to ask on: give --yes to delete without asking\n")
    code, _, err = cli("delete", "train", "ghost", "--yes")
    assert (code, err) == (1, "astra: error: no run ghost on fake://test: nothing was deleted\n")
    assert "train" in world.cluster.names()
    code, out, _ = cli("delete", "train", "--yes")
    assert code == 0 and out.endswith("train: deleted\n") and "train" not in world.cluster.names()


def test_astra_delete_leaves_the_source_s_inventory_and_the_plan_does_not_say_outside_astra(world, cli):
    applied(world, cli)
    runs_column = lambda: cli("status")[1].splitlines()[1].split()[4]  # noqa: E731
    assert runs_column() == "3"
    assert cli("delete", "train", "--yes")[0] == 0
    assert runs_column() == "2"  # the source no longer counts it
    code, out, _ = cli("plan", "-f", "runs", "--source", "team-repo")
    assert code == 0 and "+ train  create  (runs/train.yaml)" in out
    assert "outside astra" not in out and "planned back" not in out


def test_a_run_deleted_by_hand_is_planned_back_in_words_that_hold_for_any_deleter(world, cli):
    applied(world, cli)
    world.cluster.delete_run("train")  # by the API, the console, or another tool
    out = cli("plan", "-f", "runs", "--source", "team-repo")[1]
    assert "why: deleted since its last apply: planned back" in out
    assert "outside astra" not in out
