"""``astra rerun`` asks like the other write verbs (fake cluster): it says what it creates and
how many GPUs, only ``yes`` goes on, ``--yes`` skips the question, no terminal needs ``--yes``."""

from __future__ import annotations

from reconciler.runs import WorkerInfo

from .test_delete import Terminal

SWEEP = {
    "metadata": {"name": "sw"},
    "spec": {
        "array": {"size": 4, "max_parallel": 2},
        "task_template": {"image": "x", "requested_resources": {"gpu_requests": {"count": 2}}},
    },
}


def _failed_sweep(world) -> list[tuple[str, bool]]:
    """A finished array ``sw`` whose copies 1 and 3 failed; the reruns the cluster was asked for."""
    asked: list[tuple[str, bool]] = []
    world.cluster.create_run(SWEEP)
    copies = [
        WorkerInfo(f"sw-{i}", i, "Failed" if i in (1, 3) else "Completed", "", gpus=2) for i in range(4)
    ]
    world.cluster.set_state("sw", "Failed", "2 copies failed", workers=copies)

    def rerun(name: str, *, failed: bool):
        asked.append((name, failed))
        return world.cluster.get_run(name)

    world.cluster.rerun = rerun  # the fake has no rerun of its own
    return asked


def test_rerun_says_what_it_makes_and_how_many_gpus_and_asks(world, cli, monkeypatch):
    asked = _failed_sweep(world)
    monkeypatch.setattr("sys.stdin", Terminal("no\n"))
    code, out, err = cli("rerun", "sw", "--failed")
    assert (code, err) == (1, "astra: error: nothing was rerun: the answer was not 'yes'\n")
    assert out == (
        "+ sw-rerun-1  a new array of the 2 copies of sw that did not complete: 2 copies of 2 GPUs\n"
        "Rerun it on fake://test? Only 'yes' goes on.\n"
        "Enter a value: "
    )
    assert asked == []
    monkeypatch.setattr("sys.stdin", Terminal("yes\n"))
    code, out, _ = cli("rerun", "sw")
    assert code == 0 and out.startswith(
        "+ sw  runs again whole (Failed now): 4 copies of 2 GPUs, at most 2 at once\n"
    )
    assert out.endswith("sw: runs again (whole)\n")
    assert asked == [("sw", False)]


def test_rerun_without_a_terminal_needs_yes(world, cli):
    asked = _failed_sweep(world)
    code, out, err = cli("rerun", "sw")
    assert (code, err) == (1, "astra: error: no terminal to ask on: give --yes to rerun without asking\n")
    assert asked == []
    code, out, _ = cli("rerun", "sw", "-y")
    assert code == 0 and out.endswith("sw: runs again (whole)\n") and asked == [("sw", False)]
    code, _, err = cli("rerun", "ghost", "--yes")
    assert (code, err) == (1, "astra: error: no run ghost on fake://test: nothing was rerun\n")


def test_a_run_the_cluster_will_refuse_is_not_asked_about(world, cli):
    asked = _failed_sweep(world)
    world.cluster.set_state("sw", "Running")
    code, out, _ = cli("rerun", "sw")  # no terminal, no --yes: the cluster says why not
    assert code == 0 and asked == [("sw", False)] and "Only 'yes'" not in out
