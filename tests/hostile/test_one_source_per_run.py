"""A run belongs to one source (issue 28, finding 6): a source that would take a run another
source applied is refused with words, unless told to adopt it (``astra source adopt``); a prune
deletes only what the source still owns. Two watch loops on one folder under two source names
do the same: the second one stalls with the words, and the run stays the first one's.

The commands run in-process on the fake cluster (which keeps the sources' state), as
``tests/plan/test_cli.py``'s do; the loops with the test's clock.
"""

from __future__ import annotations

import io
import json
import random
import textwrap
from pathlib import Path

import pytest

from reconciler.cli.app import run
from reconciler.loop import Reconciler
from reconciler.reconcile import Source
from reconciler.state import InventoryEntry
from tests.plan.conftest import NOW, RUN, World

REFUSED = "shared-run is applied by source src-x: remove it there, or astra source adopt"


@pytest.fixture
def world(tmp_path, monkeypatch) -> World:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ASTRA_HOME", str(tmp_path / ".astra"))
    monkeypatch.delenv("ASTRA_TEMPLATE_PATH", raising=False)
    monkeypatch.delenv("ASTRA_SERVER", raising=False)
    return World(tmp_path)


@pytest.fixture
def cli(world, monkeypatch, capsys):
    monkeypatch.setattr("reconciler.cli.connect.connect", lambda server, token, **_: world.cluster)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))

    def call(*argv: str) -> tuple[int, str, str]:
        code = run(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return call


def put(folder: str, name: str) -> Path:
    path = Path(folder) / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(RUN.format(name=name, image="python:3.12", gpus=1)))
    return path


def test_a_source_does_not_take_another_sources_run_nor_prune_it(world, cli):
    put("fx", "shared-run")
    put("fy", "shared-run")
    put("fy", "mine")
    code, out, err = cli("apply", "-f", "fx", "--source", "src-x", "--yes")
    assert code == 0 and "shared-run: created" in out, err
    before = world.cluster.get_run("shared-run").resource_version

    code, out, err = cli("plan", "-f", "fy", "--source", "src-y")
    assert code == 1 and REFUSED + " shared-run --source src-y" in err, (out, err)
    code, out, err = cli("apply", "-f", "fy", "--source", "src-y", "--yes")
    assert code == 1 and REFUSED in err
    assert "mine" not in world.cluster.names()  # refused whole: nothing applied
    assert sorted(world.store.read("src-y").inventory) == []

    (Path("fy") / "shared-run.yaml").unlink()
    code, out, err = cli("apply", "-f", "fy", "--source", "src-y", "--prune", "--yes")
    assert code == 0, err
    assert sorted(world.cluster.names()) == ["mine", "shared-run"]
    assert world.cluster.get_run("shared-run").resource_version == before
    assert sorted(world.store.read("src-x").inventory) == ["shared-run"]
    assert sorted(world.store.read("src-y").inventory) == ["mine"]


def test_astra_source_adopt_moves_the_run_on_purpose(world, cli):
    put("fx", "shared-run")
    put("fy", "shared-run")
    assert cli("apply", "-f", "fx", "--source", "src-x", "--yes")[0] == 0

    code, out, err = cli("source", "adopt", "shared-run", "--source", "src-y")
    assert (code, out.strip()) == (0, "shared-run: adopted by source src-y from source src-x"), err
    assert sorted(world.store.read("src-x").inventory) == []
    assert sorted(world.store.read("src-y").inventory) == ["shared-run"]

    code, out, err = cli("apply", "-f", "fy", "--source", "src-y", "--yes")
    assert code == 0, err
    code, out, err = cli("apply", "-f", "fx", "--source", "src-x", "--yes")
    assert code == 1 and "shared-run is applied by source src-y: remove it there" in err

    code, out, err = cli("source", "adopt", "nobodys", "--source", "src-y")
    assert code == 1 and "no other source applied nobodys: nothing to adopt" in err

    (Path("fy") / "shared-run.yaml").unlink()
    code, out, err = cli("apply", "-f", "fy", "--source", "src-y", "--prune", "--allow-empty", "--yes")
    assert code == 0 and "shared-run: deleted" in out, err
    assert world.cluster.names() == []


def test_a_run_two_inventories_hold_is_not_pruned_by_either(world, cli):
    """As an older astra could leave it: both sources recorded the run."""
    put("fx", "shared-run")
    put("fy", "keep")
    assert cli("apply", "-f", "fx", "--source", "src-x", "--yes")[0] == 0
    entry = world.store.inventory("src-x")["shared-run"]
    world.store.record("src-y", "shared-run", InventoryEntry(entry.spec, NOW, entry.file))
    code, out, err = cli("apply", "-f", "fy", "--source", "src-y", "--prune", "--yes")
    assert code == 0, err
    assert "shared-run" in world.cluster.names()
    assert "shared-run: deleted" not in out


def loop(world: World, name: str, store=None) -> Reconciler:
    return Reconciler(
        Source(name, ("runs",), prune=True),
        world.cluster,
        store or world.store,
        clock=lambda: NOW,
        who=f"{name}@h:1",
        cache=world.cache,
        rng=random.Random(1),
    )


def test_two_watch_loops_on_one_folder_under_two_names_do_not_share_a_run(world):
    world.run("shared-run")
    first = loop(world, "src-x").reconcile_once()
    assert first["state"] == "Ready"
    second = loop(world, "src-y").reconcile_once()
    assert (second["state"], second["reason"]) == ("Stalled", "PlanFailed")
    assert REFUSED in second["message"]
    assert sorted(world.store.read("src-y").inventory) == []
    (world.root / "runs" / "shared-run.yaml").unlink()
    world.run("other")
    assert loop(world, "src-y").reconcile_once()["state"] == "Ready"  # its prune leaves src-x's run
    assert sorted(world.cluster.names()) == ["other", "shared-run"]


class RacedStore:
    """A store that runs ``meanwhile`` once, just before the first lock it is asked for."""

    def __init__(self, store, meanwhile) -> None:
        self._store, self._meanwhile = store, meanwhile

    def lock(self, *args):
        if self._meanwhile is not None:
            meanwhile, self._meanwhile = self._meanwhile, None
            meanwhile()
        return self._store.lock(*args)

    def __getattr__(self, name: str):
        return getattr(self._store, name)


def test_two_loops_that_plan_the_same_create_at_once_leave_it_to_the_first(world):
    world.run("shared-run")
    x = loop(world, "src-x")
    y = loop(world, "src-y", RacedStore(world.store, x.reconcile_once))
    status = y.reconcile_once()  # planned a create; src-x created it before src-y's apply
    assert (status["state"], status["reason"]) == ("Stalled", "PlanFailed")
    assert REFUSED in status["message"]
    assert sorted(world.store.read("src-x").inventory) == ["shared-run"]
    assert sorted(world.store.read("src-y").inventory) == []


def test_the_reproduction_against_a_live_server_is_refused_in_words(tmp_path):
    """The finding as it was found: ``astra apply`` twice, against the embedded control plane."""
    from tests.controlplane_api.conftest import LiveServer

    work = tmp_path / "work"
    small = "metadata: {{name: {}}}\nspec: {{task_template: {{image: x, command: 'true'}}}}\n"
    for folder in ("fx", "fy"):
        (work / folder).mkdir(parents=True)
        (work / folder / "shared-run.yaml").write_text(small.format("shared-run"))
    (work / "fy" / "mine.yaml").write_text(small.format("mine"))
    server = LiveServer(tmp_path / "home", work).start()
    try:
        made = server.astra("apply", "-f", "fx", "--source", "src-x", "--yes")
        assert made.returncode == 0, made.stderr
        taken = server.astra("apply", "-f", "fy", "--source", "src-y", "--yes")
        assert taken.returncode == 1
        assert taken.stderr.strip().splitlines() == [f"astra: error: {REFUSED} shared-run --source src-y"]
        (work / "fy" / "shared-run.yaml").unlink()
        pruned = server.astra("apply", "-f", "fy", "--source", "src-y", "--prune", "--yes")
        assert pruned.returncode == 0, pruned.stderr
        assert server.api("GET", "/runs/shared-run").status_code == 200
        listed = server.astra("source", "list", "-o", "json")
        held = {s["name"]: s["runs"] for s in json.loads(listed.stdout)}
        assert held == {"src-x": ["shared-run"], "src-y": ["mine"]}
    finally:
        server.stop()
