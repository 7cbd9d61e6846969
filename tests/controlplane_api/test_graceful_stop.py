"""A stopped worker has its grace: the stop signal, then ``stop_grace_seconds`` before SIGKILL; a
preempted one goes back to the queue with its restart budget as it was, and starts again knowing
which start it is and why (``ASTRAEUS_ATTEMPT``, ``ASTRAEUS_RESTART_REASON``). Real processes on
one machine of 8 GPUs; the plane's clock is the test's."""

from __future__ import annotations

from reconciler.controlplane.inventory import default_inventory

from .conftest import Plane, until

#: Says each start, and on TERM writes a checkpoint after 2 s, then ends.
CHECKPOINTS = (
    'echo "$ASTRAEUS_ATTEMPT ${ASTRAEUS_RESTART_REASON:-none}" >> starts.txt; '
    "trap 'sleep 2; echo saved > checkpoint.$ASTRAEUS_ATTEMPT; exit 143' TERM; "
    "sleep 600 & wait"
)


def gpu_run(name: str, command: str, *, priority: int, **template) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "priority": priority,
            "task_template": {
                "image": "busybox",
                "command": "sh",
                "args": ["-c", command],
                "requested_resources": {"gpu_requests": {"count": 8}},
                **template,
            },
        },
    }


def test_a_preempted_worker_gets_term_and_its_grace_and_restarts_as_attempt_1_with_its_budget(tmp_path):
    plane = Plane(tmp_path, grace=None, inventory=default_inventory(racks=1, machines_per_rack=1))
    starts, saved = tmp_path / "starts.txt", tmp_path / "checkpoint.0"
    try:
        plane.engine.submit(gpu_run("low", CHECKPOINTS, priority=1), plane.clock.now())
        until(
            lambda: starts.exists() and starts.read_text() == "0 none\n", step=plane.step, what="low to start"
        )
        plane.engine.submit(
            gpu_run("high", "sleep 3", priority=10, restart_policy="Never"), plane.clock.now()
        )
        until(lambda: plane.worker("high-0").state == "Running", step=plane.step, what="high to preempt low")
        low = plane.worker("low-0")
        assert (low.state, low.restart_reason) == ("Pending", "Preempted")  # back in the queue
        until(saved.exists, step=plane.step, what="low's checkpoint, written 2 s after TERM")
        assert saved.read_text() == "saved\n"  # not killed within its 30 s
        plane.settle_run("high")
        until(lambda: starts.read_text().count("\n") == 2, step=plane.step, what="low to start again")
        assert starts.read_text().splitlines() == ["0 none", "1 Preempted"]
        assert plane.worker("low-0").restarts == 0  # the budget is not spent by a preemption
    finally:
        plane.close()


def test_a_worker_stopped_past_its_grace_is_killed_before_its_checkpoint(tmp_path):
    plane = Plane(tmp_path, grace=None, inventory=default_inventory(racks=1, machines_per_rack=1))
    starts = tmp_path / "starts.txt"
    try:
        doc = gpu_run("low", CHECKPOINTS, priority=1, stop_grace_seconds=1)
        plane.engine.submit(doc, plane.clock.now())
        until(lambda: starts.exists(), step=plane.step, what="low to start")
        pid = plane.engine.processes["low-0"]["pid"]
        from reconciler.controlplane.executor import process_alive

        plane.engine.cancel("low", plane.clock.now())
        until(lambda: not process_alive(pid, None), step=plane.step, what="low to be killed after 1 s")
        plane.settle_run("low")
        assert not (tmp_path / "checkpoint.0").exists()
    finally:
        plane.close()
