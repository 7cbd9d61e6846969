"""``apply --wait`` tells the truth (fake cluster, simulated clock): a Service is Ready only after
running ``--settle`` seconds without a restart; a restart fails the wait, naming run and reason;
Ctrl-C says the runs go on."""

from __future__ import annotations

from dataclasses import replace

from reconciler.clusters.base import WorkerInfo

SERVICE = """\
metadata:
  name: web
spec:
  lifetime: Service
  task_template:
    image: python:3.12
    command: python
    args: [serve.py]
"""


def test_a_service_is_ready_after_settling_without_a_restart(world, cli, later):
    world.write("web.yaml", SERVICE)
    later += [lambda: world.cluster.start("web", workers=1)] + [lambda: None] * 20
    code, out, err = cli("apply", "-f", "runs", "--source", "s", "--yes", "--wait", "--settle", "5")
    assert (code, err) == (0, "")
    assert out.endswith("web: Ready (Running for 5 s without a restart)\n")
    assert len(later) == 20 - 5  # it looked once a second: Running at 1 s, Ready at 6 s


def test_a_service_that_restarts_while_waited_on_fails_the_wait_naming_run_and_reason(world, cli, later):
    world.write("web.yaml", SERVICE)
    reason = "Exited with code 1; restart 1 in 10 s"

    def crash() -> None:
        w = world.cluster.workers("web")[0]
        world.cluster.set_state("web", "Running", workers=[replace(w, reason=reason, state="Failed")])

    later += [lambda: world.cluster.start("web", workers=1), lambda: None, crash]
    code, _, err = cli("apply", "-f", "runs", "--source", "s", "--yes", "--wait")
    assert code == 1
    assert err == (
        f"astra: error: run web is Restarting: {reason}\nastra: error: 1 of 1 runs did not succeed: web\n"
    )


def test_a_restart_seen_only_in_the_count_fails_too(world, cli, later):
    world.write("web.yaml", SERVICE)

    def restarted() -> None:
        w = WorkerInfo("web-0", 0, "Running", "", machine="m0", restarts=1)
        world.cluster.set_state("web", "Running", workers=[w])

    later += [lambda: world.cluster.start("web", workers=1), restarted]
    code, _, err = cli("apply", "-f", "runs", "--source", "s", "--yes", "--wait")
    assert code == 1 and err.startswith("astra: error: run web is Restarting: ")


def test_batch_runs_wait_until_they_end(world, cli, later):
    world.run("train")
    later += [lambda: world.cluster.start("train", workers=1), lambda: world.cluster.finish("train", "Failed",
              reason="Worker train-0 failed on m0: Exited with code 1")]  # fmt: skip
    code, _, err = cli("apply", "-f", "runs", "--source", "s", "--yes", "--wait")
    assert code == 1 and err.endswith(
        "astra: error: run train is Failed: Worker train-0 failed on m0: Exited with code 1\n"
        "astra: error: 1 of 1 runs did not succeed: train\n"
    )


def test_ctrl_c_says_the_runs_go_on_and_how_to_follow_them(world, cli):
    world.write("web.yaml", SERVICE)
    world.run("train")
    code, _, err = cli("apply", "-f", "runs", "--source", "s", "--yes", "--wait")  # no `later`: Ctrl-C
    assert code == 130
    assert err.endswith(  # after the warning of train's missing time limit
        "astra: error: stopped waiting: the runs go on on fake://test\n"
        "Follow them: astra get runs train web --watch\n"
    )


# ---- a Batch run whose workers cannot get going (issue 32) ---------------------------------------

CANNOT = (
    "1 of 1 workers restarting: Worker train-0: Could not start 'trainz': No such file or directory "
    "(exit code 127); restart 1 of 10 in 10 s"
)


def test_a_worker_that_cannot_start_at_all_ends_the_wait_with_its_reason(world, cli, later):
    world.run("train")
    later += [lambda: world.cluster.set_state("train", "Pending", CANNOT)] + [lambda: None] * 20
    code, _, err = cli("apply", "-f", "runs", "--source", "s", "--yes", "--wait")
    assert code == 1
    assert err.endswith(
        f"astra: error: run train is Restarting: a worker cannot start at all: {CANNOT}\n"
        "astra: error: 1 of 1 runs did not succeed: train\n"
    )
    assert len(later) == 20  # at the first look that said so: not after the backoff


def _crash(n: int, code: int = 2) -> str:
    return (
        f"1 of 1 workers restarting: Worker train-0: Exited with code {code}; "
        f"restart {n} of 10 in {min(10 * 2 ** (n - 1), 300)} s"
    )


def test_half_the_restart_budget_spent_on_one_failure_ends_the_wait(world, cli, later):
    world.run("train")
    later += [lambda n=n: world.cluster.set_state("train", "Pending", _crash(n)) for n in range(1, 11)]
    code, _, err = cli("apply", "-f", "runs", "--source", "s", "--yes", "--wait")
    assert code == 1
    assert err.endswith(
        "astra: error: run train is Restarting: 5 restarts of 10 spent on the same failure: "
        f"{_crash(5)}\nastra: error: 1 of 1 runs did not succeed: train\n"
    )
    assert len(later) == 5


def test_an_array_whose_copies_crash_alike_ends_the_wait_while_another_copy_runs(world, cli, later):
    """The seeds' sweep: while one copy runs, the run is Running and its reason begins with the
    readout; the copy named changes from look to look. The failure is the same all along."""
    world.run("train")

    def look(n: int) -> str:
        readout = "Workers 1 running of 4; " if n % 2 else ""
        return f"{readout}3 of 4 workers restarting: Worker train-{n % 3}: Exited with code 2; " + (
            f"restart {n} of 10 in {min(10 * 2 ** (n - 1), 300)} s"
        )

    later += [
        lambda n=n: world.cluster.set_state("train", "Running" if n % 2 else "Pending", look(n))
        for n in range(1, 11)
    ]
    code, _, err = cli("apply", "-f", "runs", "--source", "s", "--yes", "--wait")
    assert code == 1
    assert err.endswith(
        "astra: error: run train is Restarting: 5 restarts of 10 spent on the same failure: "
        f"{look(5)}\nastra: error: 1 of 1 runs did not succeed: train\n"
    )
    assert len(later) == 5


def test_restarts_on_different_failures_are_waited_through(world, cli, later):
    world.run("train")
    later += [lambda n=n: world.cluster.set_state("train", "Pending", _crash(n, code=n)) for n in range(1, 8)]
    later += [lambda: world.cluster.finish("train", "Completed")]
    code, out, _ = cli("apply", "-f", "runs", "--source", "s", "--yes", "--wait")
    assert code == 0 and out.endswith("train: Completed\n")


def test_settling_is_said_in_tenths_of_a_second():
    from reconciler.runs import LiveRun
    from reconciler.waiting import WaitJudge

    run = LiveRun("web", {"spec": {"lifetime": "Service"}}, 1, "Running")
    judge = WaitJudge(settle=10)
    judge.see("web", run, [], 100.0)
    assert judge.see("web", run, [], 101.02386).reason == "settling: 1.0 of 10 s"


def test_apply_help_says_when_wait_gives_up(cli):
    from reconciler.runspec.restarting import HOPELESS_RULE

    code, out, _ = cli("apply", "--help")
    assert code == 0
    assert HOPELESS_RULE in " ".join(out.replace("│", " ").split())


def test_a_run_on_a_schedule_is_done_at_once_it_never_runs_itself():
    from reconciler.runs import LiveRun
    from reconciler.waiting import BAD, WaitJudge

    run = LiveRun("nightly", {"spec": {}}, 1, "Pending", schedule={"cron": "0 2 * * *", "next_at": 1.0})
    verdict = WaitJudge().see("nightly", run, [], 100.0)
    assert (verdict.state, verdict.done, verdict.state in BAD) == ("Scheduled", True, False)
    assert verdict.reason == "on a schedule: it makes a run at each time (astra get runs shows the next)"
