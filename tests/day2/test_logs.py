"""``astra logs`` as a user reads it (fake cluster; the real processes are in ``test_local``)."""

from __future__ import annotations

from dataclasses import replace

from reconciler.clusters.base import WorkerInfo


def two_workers(world) -> None:
    world.cluster.create_run({"metadata": {"name": "job"}, "spec": {"task_template": {"image": "x"}}})
    world.cluster.start("job", workers=2)
    world.cluster.set_log("job-0", "loading\nstep 1\nstep 2\n")
    world.cluster.set_log("job-1", "hello from 1\n")


def test_a_worker_a_run_s_leader_and_every_worker(world, cli):
    two_workers(world)
    assert cli("logs", "job-1") == (0, "hello from 1\n", "")
    assert cli("logs", "job") == (
        0,
        "loading\nstep 1\nstep 2\n",
        "astra: showing the leader job-0 (rank 0 of 2 workers); add --all for every worker\n",
    )
    assert cli("logs", "job", "--all", "--tail", "1") == (0, "job-0 | step 2\njob-1 | hello from 1\n", "")
    assert cli("logs", "job-0", "--tail", "2") == (0, "step 1\nstep 2\n", "")


def test_an_array_s_name_shows_copy_0_and_says_so(world, cli):
    doc = {"metadata": {"name": "lr-sweep"}, "spec": {"array": {"size": 3}, "task_template": {"image": "x"}}}
    world.cluster.create_run(doc)
    world.cluster.start("lr-sweep", workers=3)
    world.cluster.set_log("lr-sweep-0", "copy 0\n")
    assert cli("logs", "lr-sweep") == (
        0,
        "copy 0\n",
        "astra: showing copy 0 of 3 (lr-sweep-0); name a copy (astra logs lr-sweep-1) or add --all\n",
    )


def test_unknown_names_and_attempts_where_none_are_kept_are_one_line(world, cli):
    two_workers(world)
    assert cli("logs", "job-7") == (1, "", "astra: error: no run or worker job-7 on fake://test\n")
    assert cli("logs", "nope", "--all")[2] == (
        "astra: error: --all takes a run, and there is no run nope on fake://test\n"
    )
    assert cli("logs", "job-0", "--attempt", "0")[2] == (
        "astra: error: fake://test keeps the latest attempt's output only: leave out --attempt\n"
    )


def test_follow_prints_what_comes_until_the_worker_ends(world, cli, later):
    two_workers(world)

    def more() -> None:
        world.cluster.set_log("job-0", "loading\nstep 1\nstep 2\nstep 3\n")

    def done() -> None:
        world.cluster.set_log("job-0", "loading\nstep 1\nstep 2\nstep 3\nsaved\n")
        world.cluster.finish("job")

    later += [more, lambda: None, done, lambda: world.cluster.set_log("job-0", "never read\n")]
    assert cli("logs", "job-0", "-f") == (0, "loading\nstep 1\nstep 2\nstep 3\nsaved\n", "")
    assert len(later) == 1  # it stopped once the worker had ended


def test_follow_goes_on_through_a_restart_and_starts_the_new_attempt_from_its_beginning(world, cli, later):
    two_workers(world)
    restarting = WorkerInfo("job-0", 0, "Failed", "Exited with code 1; restart 1 in 10 s", machine="m0")

    def fails() -> None:
        world.cluster.set_state("job", "Running", workers=[restarting])

    def again() -> None:
        world.cluster.set_state("job", "Running", workers=[replace(restarting, state="Running", reason="")])
        world.cluster.set_log("job-0", "loading again\n")

    later += [fails, again, lambda: world.cluster.finish("job", "Failed")]
    code, out, _ = cli("logs", "job-0", "-f")
    assert (code, out) == (0, "loading\nstep 1\nstep 2\nloading again\n")


def test_follow_all_prefixes_whole_lines_only(world, cli, later):
    two_workers(world)
    world.cluster.set_log("job-1", "hello from 1\nhalf")

    def rest() -> None:
        world.cluster.set_log("job-1", "hello from 1\nhalf a line\n")
        world.cluster.set_log("job-0", "loading\nstep 1\nstep 2\ndone")
        world.cluster.finish("job")

    later += [rest]
    code, out, _ = cli("logs", "job", "--all", "-f")
    assert code == 0
    assert out.splitlines() == [
        "job-0 | loading", "job-0 | step 1", "job-0 | step 2", "job-1 | hello from 1",
        "job-0 | done", "job-1 | half a line",
    ]  # fmt: skip
