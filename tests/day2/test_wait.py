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
