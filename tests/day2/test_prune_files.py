"""``--prune`` with files named prunes only what those files held before (issue 32): never the
runs of a sibling file that is still there, though the source is the folder's."""

from __future__ import annotations

TWO = """\
metadata: {name: plain}
spec: {task_template: {image: x, command: run, time_limit_seconds: 60}}
---
metadata: {name: extra}
spec: {task_template: {image: x, command: run, time_limit_seconds: 60}}
"""
HUGE = "metadata: {name: hugemem}\nspec: {task_template: {image: x, command: run, time_limit_seconds: 60}}\n"


def test_prune_with_a_file_named_leaves_the_runs_of_its_sibling_files(world, cli):
    world.write("plain.yaml", TWO)
    world.write("hugemem.yaml", HUGE)
    assert cli("apply", "-f", "runs", "--source", "s", "--yes")[0] == 0
    code, out, _ = cli("plan", "runs/plain.yaml", "--prune", "--source", "s")
    assert code == 0, out
    assert "hugemem" not in out and "Plan: 0 to create, 0 to update, 0 to replace, 0 to delete." in out
    world.write("plain.yaml", TWO.split("---\n")[0])  # the file no longer holds extra
    code, out, _ = cli("plan", "runs/plain.yaml", "--prune", "--source", "s")
    assert "- extra  delete  (runs/plain.yaml)" in out and "hugemem" not in out
    assert "Plan: 0 to create, 0 to update, 0 to replace, 1 to delete." in out
    # the folder named: the whole source is in reach, as ever
    (world.root / "runs" / "hugemem.yaml").unlink()
    out = cli("plan", "runs", "--prune", "--source", "s")[1]
    assert "- hugemem  delete" in out and "- extra  delete" in out


def test_the_file_named_is_the_one_recorded_however_its_path_was_written(world, cli):
    """Applied as ``./runs`` (or by an absolute path), planned as ``runs/plain.yaml``: the same
    file, so what it held before is in reach (the run it no longer holds is pruned), and the
    sibling file's runs are not."""
    for applied, named in (("./runs", "runs/plain.yaml"), (str(world.root / "runs"), "./runs/plain.yaml")):
        world.write("plain.yaml", TWO)
        world.write("hugemem.yaml", HUGE)
        assert cli("apply", "-f", applied, "--source", "s", "--yes", "--prune")[0] == 0
        world.write("plain.yaml", TWO.split("---\n")[0])
        code, out, _ = cli("plan", named, "--prune", "--source", "s")
        assert (code, "hugemem" in out) == (0, False), out
        assert "- extra  delete" in out
        assert "Plan: 0 to create, 0 to update, 0 to replace, 1 to delete." in out
