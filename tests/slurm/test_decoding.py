"""squeue --json → workers and runs in the seeds' words, and the restart rules (pure, recorded samples)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.clusters.slurm.decode import (
    TaskObs,
    expand_hostlist,
    expand_indices,
    observe_submission,
    parse_squeue,
)
from reconciler.clusters.slurm.policy import (
    Policy,
    Unit,
    Verdict,
    group_restarts,
    judge,
    run_status,
)
from reconciler.runspec.vocabulary import backoff_seconds

SAMPLES = Path(__file__).parent / "samples"


def rows(name: str):
    return parse_squeue(json.loads((SAMPLES / name).read_text()))


def test_hostlist_and_indices():
    assert expand_hostlist("vm-n[1-2]") == ["vm-n1", "vm-n2"]
    assert expand_hostlist("gpu[01-03,7],cpu1") == ["gpu01", "gpu02", "gpu03", "gpu7", "cpu1"]
    assert expand_hostlist("") == []
    assert expand_indices("2-5%2") == [2, 3, 4, 5]
    assert expand_indices("1,3,5-9:2") == [1, 3, 5, 7, 9]


def test_exit_code_is_a_wait_status():
    by_id = {r.job_id: r for r in rows("squeue-22.05-mixed.json")}
    assert by_id[19].exit_code == 7 << 8  # `exit 7`, as recorded
    obs = observe_submission(by_id.values(), 19, "rec3", None)[0]
    assert (obs.state, obs.reason, obs.exit_code, obs.end_kind) == (
        "Failed",
        "Exited with code 7",
        7,
        "failed",
    )


def test_array_tasks_and_the_pending_rest():
    obs = observe_submission(rows("squeue-22.05-mixed.json"), 18, "rec2", range(5))
    assert [(i, o.state, o.reason) for i, o in sorted(obs.items())] == [
        (0, "Completed", "Exited with code 0"),
        (1, "Failed", "Exited with code 3"),
        (2, "Running", "Running"),
        (3, "Running", "Running"),
        (4, "Pending", "Array runs at most 2 workers at once"),
    ]
    assert obs[1].machine == "vm-n1"


def test_pending_rest_as_an_index_string():
    obs = observe_submission(rows("squeue-22.05-array-pending-rest.json"), 1, "first", range(6))
    assert [o.state for _, o in sorted(obs.items())] == ["Running"] * 2 + ["Pending"] * 4
    assert obs[5].reason == "Array runs at most 2 workers at once"


def test_other_jobs_and_reused_ids_are_not_ours():
    # squeue --json ignores its filters: every job comes back, ours are picked by id AND nonce.
    obs = observe_submission(rows("squeue-22.05-mixed.json"), 19, "another-nonce", None)
    assert obs[0].state == "Unknown"
    assert "MinJobAge" in obs[0].reason


def test_gang_machines_and_cancelled():
    all_rows = rows("squeue-22.05-mixed.json")
    gang = observe_submission(all_rows, 20, "rec4", None)[0]
    assert (gang.state, gang.machines) == ("Running", ("vm-n1", "vm-n2"))
    cancelled = observe_submission(all_rows, 21, "rec5", None)[0]
    assert (cancelled.state, cancelled.end_kind) == ("Stopped", "cancelled")


def test_timeout_is_a_worker_stopped_by_its_time_limit():
    # recorded from the integration test's run `tl` (sleep 600, time_limit_seconds 60)
    obs = observe_submission(rows("squeue-22.05-timeout.json"), 1, "09f51286ede0", None, time_limit=60)[0]
    assert (obs.state, obs.reason, obs.end_kind) == ("Failed", "Stopped at its time limit of 1m", "timeout")


def test_hetjob_components_by_offset():
    all_rows = rows("squeue-22.05-hetjob.json")
    assert [(r.job_id, r.het_job_id, r.het_job_offset) for r in all_rows] == [(13, 13, 0), (14, 13, 1)]
    obs = observe_submission(all_rows, 13, "het1", None, components=2, time_limits=[None, 60])
    assert [(i, o.state, o.reason, o.machines) for i, o in sorted(obs.items())] == [
        (0, "Failed", "Exited with code 143", ("vm-n1",)),
        (1, "Failed", "Exited with code 143", ("vm-n2",)),
    ]
    # a plain job observation of the leader id still sees component 0 only
    assert observe_submission(all_rows, 13, "het1", None)[0].machines == ("vm-n1",)
    missing = observe_submission(all_rows, 13, "other", None, components=2)
    assert [o.state for o in missing.values()] == ["Unknown", "Unknown"]


# ---- the restart rules ------------------------------------------------------------------------

ARRAY = Policy("OnFailure", "RestartTask", service=False, array=True)
JOB = Policy("OnFailure", "RestartJob", service=False, array=False)


def failed(code: int = 1, start: float = 100.0, end: float = 110.0) -> TaskObs:
    return TaskObs("Failed", f"Exited with code {code}", "failed", code, ("m1",), start, end)


def test_backoff():
    assert [backoff_seconds(n) for n in range(1, 8)] == [10, 20, 40, 80, 160, 300, 300]


def test_failure_is_resubmitted_after_the_backoff_from_its_end():
    v = judge(ARRAY, Unit(3, failed(), restarts=0), now=111.0)
    assert (v.state, v.final) == ("Pending", False)
    assert v.resubmit is not None
    assert (v.resubmit.index, v.resubmit.restart, v.resubmit.not_before) == (3, 1, 120.0)
    assert v.reason == "Exited with code 1; restart 1 of 10 in 10 s"
    v = judge(ARRAY, Unit(3, failed(), restarts=3), now=111.0)
    assert v.resubmit is not None and (v.resubmit.restart, v.resubmit.not_before) == (4, 110.0 + 80)


def test_no_restarts_left():
    v = judge(JOB, Unit(0, failed(), restarts=10), now=111.0)
    assert (v.state, v.final, v.fails_run, v.resubmit) == ("Failed", True, True, None)
    assert v.reason == "Exited with code 1; no restarts left (10 used)"


def test_ten_minutes_resets_the_count():
    v = judge(JOB, Unit(0, failed(start=0, end=600), restarts=10), now=601.0)
    assert v.resubmit is not None and v.resubmit.restart == 1


def test_never_and_failjob():
    never = Policy("Never", "RestartTask", service=False, array=True)
    v = judge(never, Unit(1, failed()), now=200)
    assert (v.final, v.fails_run, v.resubmit) == (True, False, None)
    failjob = Policy("OnFailure", "FailJob", service=False, array=True)
    assert judge(failjob, Unit(1, failed()), now=200).fails_run


def test_time_limit_is_never_restarted_but_a_service_is():
    t = TaskObs("Failed", "Stopped at its time limit of 1m", "timeout", 0, ("m1",), 0, 60)
    assert judge(JOB, Unit(0, t), now=100).final
    service = Policy("OnFailure", "RestartJob", service=True, array=False)
    assert judge(service, Unit(0, t), now=100).resubmit is not None


def test_always_and_service_restart_completions_without_budget():
    done = TaskObs("Completed", "Exited with code 0", "ok", 0, ("m1",), 0, 50)
    always = Policy("Always", "RestartTask", service=False, array=True)
    v = judge(always, Unit(2, done, restarts=4), now=55)
    assert v.resubmit is not None and (v.resubmit.restart, v.resubmit.not_before) == (4, 60)
    assert judge(ARRAY, Unit(2, done), now=55).final


def test_waiting_restart_shows_why():
    pending = TaskObs("Pending", "Waiting in the queue (BeginTime)")
    v = judge(ARRAY, Unit(0, pending, restarts=1, why="Exited with code 1; restart 1 of 10 in 10 s"), now=0)
    assert v.reason == "Exited with code 1; restart 1 of 10 in 10 s"


def test_failed_array_reason_in_the_seeds_words():
    ok = judge(ARRAY, Unit(0, TaskObs("Completed", "Exited with code 0", "ok", 0, ("m1",), 0, 5)), 10)
    never = Policy("Never", "RestartTask", service=False, array=True)
    bad = judge(never, Unit(1, failed(code=3)), 200)
    status = run_status(never, [("sweep-0", ok, "m1", 5.0), ("sweep-1", bad, "gpu-02", 110.0)])
    assert status.state == "Failed"
    assert (
        status.reason
        == "1 of 2 workers failed; the first: Worker sweep-1 failed on gpu-02: Exited with code 3"
    )


def test_running_readout_and_waiting_reason():
    run_ = judge(ARRAY, Unit(0, TaskObs("Running", "Running")), 0)
    wait = judge(ARRAY, Unit(1, TaskObs("Pending", "Array runs at most 1 workers at once")), 0)
    status = run_status(ARRAY, [("s-0", run_, "m", None), ("s-1", wait, None, None)])
    assert (status.state, status.reason) == ("Running", "Workers 1 running of 2")
    status = run_status(ARRAY, [("s-1", wait, None, None)])
    assert (status.state, status.reason) == ("Pending", "Array runs at most 1 workers at once")


def test_a_failed_job_fails_its_run_at_once():
    v = judge(Policy("Never", "RestartJob", service=False, array=False), Unit(0, failed(code=2)), 200)
    status = run_status(JOB, [("t-0", v, "vm-n1", 110.0), ("t-1", v, "vm-n2", 110.0)])
    assert (status.state, status.reason) == ("Failed", "Worker t-0 failed on vm-n1: Exited with code 2")


@pytest.mark.parametrize(
    "state", ["COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY"]
)
def test_every_final_slurm_state_ends_the_worker(state):
    from reconciler.clusters.slurm.decode import JobRow, describe

    row = JobRow(1, 0, None, "", 0, state, "None", 256, 1.0, 2.0, ("m",), "r", "")
    assert describe(row, 60).end_kind is not None


# ---- what a group's restart covers ------------------------------------------------------------


def group_units(*obs: TaskObs, policy: Policy = JOB, restarts: int = 0) -> list[tuple[Unit, Verdict]]:
    units = [Unit(i, o, restarts) for i, o in enumerate(obs)]
    return [(u, judge(policy, u, now=111.0)) for u in units]


RUNNING = TaskObs("Running", "Running", None, None, ("m2",), 100.0)
DONE = TaskObs("Completed", "Exited with code 0", "ok", 0, ("m1",), 0, 50)


def test_restart_job_restarts_every_group():
    plan = group_restarts("RestartJob", group_units(RUNNING, failed()), one_job=False)
    assert plan.groups == ()
    assert plan.whole is not None and (plan.whole.restart, plan.whole.not_before) == (1, 120.0)
    assert plan.whole.why == "Exited with code 1; restart 1 of 10 in 10 s"


def test_restart_task_restarts_that_group_but_the_leaders_restarts_all():
    task = Policy("OnFailure", "RestartTask", service=False, array=False)
    plan = group_restarts("RestartTask", group_units(RUNNING, failed(), policy=task), one_job=False)
    assert plan.whole is None and [r.index for r in plan.groups] == [1]
    plan = group_restarts("RestartTask", group_units(failed(), RUNNING, policy=task), one_job=False)
    assert plan.whole is not None and plan.groups == ()


def test_a_hetjob_restarts_whole_and_completions_restart_alone():
    task = Policy("OnFailure", "RestartTask", service=False, array=False)
    assert group_restarts("RestartTask", group_units(RUNNING, failed(), policy=task), one_job=True).whole
    always = Policy("Always", "RestartJob", service=False, array=False)
    plan = group_restarts("RestartJob", group_units(RUNNING, DONE, policy=always), one_job=False)
    assert plan.whole is None and [r.index for r in plan.groups] == [1]


def test_no_restart_when_nothing_ended_or_it_is_final():
    assert group_restarts("RestartJob", group_units(RUNNING, RUNNING), one_job=False).whole is None
    never = Policy("Never", "RestartJob", service=False, array=False)
    units = group_units(RUNNING, failed(), policy=never)
    plan = group_restarts("RestartJob", units, one_job=False)
    assert (plan.whole, plan.groups) == (None, ())
    status = run_status(
        never, [("pt-ps-0", units[0][1], "m2", None), ("pt-trainer-0", units[1][1], "m1", 110.0)]
    )
    assert (status.state, status.reason) == ("Failed", "Worker pt-trainer-0 failed on m1: Exited with code 1")
