"""Retry rules by exit code (``task_template.on_exit_codes``) on Slurm, as the embedded control
plane keeps them: the pure rules over observed workers (``policy.judge``, a clock given), and on
the REAL local Slurm cluster a ``FailJob`` code failing the run at once and a
``RestartIgnoreBudget`` code resubmitted without spending the budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.clusters.slurm import SlurmCluster
from reconciler.clusters.slurm.decode import TaskObs
from reconciler.clusters.slurm.observe import policy_of
from reconciler.clusters.slurm.policy import Policy, Unit, judge, run_status
from reconciler.runspec.parse import parse_run

from .test_integration import _cluster_up, doc, final, wait_for


@pytest.fixture
def live(tmp_path: Path, monkeypatch) -> SlurmCluster:
    problem = _cluster_up()
    if problem is not None:
        pytest.fail(f"The local Slurm cluster is not up: {problem}", pytrace=False)
    monkeypatch.chdir(tmp_path)  # nothing is written into the checkout
    return SlurmCluster.from_url("slurm://debug", state_dir=tmp_path / "state")


RULES = [{"codes": [3], "action": "FailJob"}, {"codes": [137, 143], "action": "RestartIgnoreBudget"}]


def ruled(name: str, script: str, **template) -> dict:
    return doc(name, script, task_template={"on_exit_codes": RULES, **template})


def exited(code: int, start: float = 100.0, end: float = 110.0) -> TaskObs:
    return TaskObs("Failed", f"Exited with code {code}", "failed", code, ("vm-n1",), start, end, "FAILED")


def test_the_rules_are_read_from_the_template():
    policy = policy_of(parse_run(ruled("r", "true")))
    assert policy.exit_codes == (((3,), "FailJob"), ((137, 143), "RestartIgnoreBudget"))
    assert policy_of(parse_run(doc("plain", "true"))).exit_codes == ()


def test_failjob_fails_the_run_at_once_and_says_which_rule():
    policy = policy_of(parse_run(ruled("r", "true")))
    v = judge(policy, Unit(0, exited(3)), now=111.0)
    assert (v.state, v.final, v.fails_run, v.resubmit) == ("Failed", True, True, None)
    assert v.reason == "Exited with code 3 (on_exit_codes[0]: FailJob)"
    status = run_status(policy, [("r-0", v, "vm-n1", 110.0)])
    assert (status.state, status.reason) == (
        "Failed",
        "Worker r-0 failed on vm-n1: Exited with code 3 (on_exit_codes[0]: FailJob)",
    )
    array = Policy("OnFailure", "RestartTask", service=False, array=True, exit_codes=policy.exit_codes)
    assert judge(array, Unit(4, exited(3)), now=111.0).fails_run  # an array too


def test_restart_ignore_budget_restarts_past_the_seeds_ten_without_spending():
    policy = policy_of(parse_run(ruled("r", "true")))
    v = judge(policy, Unit(0, exited(137), restarts=10), now=111.0)  # the budget all spent already
    assert v.resubmit is not None and (v.resubmit.restart, v.resubmit.not_before) == (10, 120.0)
    assert v.reason == (
        "Exited with code 137 (on_exit_codes[1]: RestartIgnoreBudget); "
        "restarting in 10 s, the restart budget kept (10 of 10 spent)"
    )
    assert v.resubmit.cause == "Failed"
    # a code no rule names spends the budget as the seeds say: none left
    spent = judge(policy, Unit(0, exited(1), restarts=10), now=111.0)
    assert (spent.final, spent.reason) == (True, "Exited with code 1; no restarts left (10 used)")


def test_restart_restarts_even_under_never_and_spends_the_budget():
    rules = [{"codes": [75], "action": "Restart"}]
    policy = policy_of(
        parse_run(doc("r", "true", task_template={"on_exit_codes": rules, "restart_policy": "Never"}))
    )
    v = judge(policy, Unit(0, exited(75), restarts=2), now=111.0)
    assert v.resubmit is not None and v.resubmit.restart == 3
    assert v.reason == "Exited with code 75 (on_exit_codes[0]: Restart); restart 3 of 10 in 40 s"
    assert judge(policy, Unit(0, exited(1)), now=111.0).final  # Never, for the other codes


def test_a_time_limit_or_a_signal_is_no_exit_code_a_rule_reads():
    policy = policy_of(parse_run(ruled("r", "true")))
    limit = TaskObs("Failed", "Stopped at its time limit of 1m", "timeout", 0, ("m",), 0, 60, "TIMEOUT")
    assert judge(policy, Unit(0, limit), now=100).reason == "Stopped at its time limit of 1m"
    killed = TaskObs("Failed", "Killed by signal 9", "failed", 0, ("m",), 0, 60, "FAILED")
    assert judge(policy, Unit(0, killed), now=100).reason.startswith("Killed by signal 9; restart 1")


def test_on_slurm_failjob_fails_at_once_and_restart_ignore_budget_keeps_it(
    live: SlurmCluster, tmp_path: Path
):
    d, cluster = tmp_path, live
    cluster.create_run(ruled("bad-input", f"echo x >> {d}/bad; exit 3"))
    run = final(cluster, "bad-input", 90)
    machine = cluster.workers("bad-input")[0].machine
    assert (run.state, run.reason) == (
        "Failed",
        f"Worker bad-input-0 failed on {machine}: Exited with code 3 (on_exit_codes[0]: FailJob)",
    )
    assert (d / "bad").read_text() == "x\n"  # OnFailure alone would have restarted it
    assert len(cluster.records.load("bad-input")["attempts"]) == 1

    script = (
        f'echo "$ASTRAEUS_ATTEMPT ${{ASTRAEUS_RESTART_REASON:-none}}" >> {d}/oom; '
        f"[ -s {d}/again ] || {{ echo 1 > {d}/again; exit 137; }}"
    )
    cluster.create_run(ruled("oom", script))
    worker = wait_for(
        "its exit 137 to be judged",
        lambda: cluster.workers("oom")[0],
        lambda w: w.state == "Pending" and "137" in w.reason,
        90,
    )
    assert worker.reason == (
        "Exited with code 137 (on_exit_codes[1]: RestartIgnoreBudget); "
        "restarting in 10 s, the restart budget kept (0 of 10 spent)"
    )
    assert final(cluster, "oom", 120).state == "Completed"
    assert (d / "oom").read_text().splitlines() == ["0 none", "1 Failed"]
    assert [w.restarts for w in cluster.workers("oom")] == [0]
    cluster.delete_run("bad-input")
    cluster.delete_run("oom")
