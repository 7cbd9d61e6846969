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


#: Says each start; on USR1 writes a checkpoint after 2 s and ends (0: its work is saved).
ON_USR1 = (
    'echo "$ASTRAEUS_ATTEMPT" >> starts.txt; '
    "trap 'sleep 2; echo saved > checkpoint; exit 0' USR1; "
    "sleep 600 & wait"
)


def test_the_time_limit_sends_the_stop_signal_and_gives_the_grace_and_the_worker_is_not_restarted(tmp_path):
    plane = Plane(tmp_path, grace=None, inventory=default_inventory(racks=1, machines_per_rack=1))
    starts, saved = tmp_path / "starts.txt", tmp_path / "checkpoint"
    try:
        doc = gpu_run("tl", ON_USR1, priority=1, stop_signal="USR1", time_limit_seconds=60)
        plane.engine.submit(doc, plane.clock.now())
        until(lambda: starts.exists(), step=plane.step, what="tl to start")
        plane.clock.advance(61)  # the engine's clock: past its time limit
        until(saved.exists, step=plane.step, what="the checkpoint, written 2 s after USR1")
        assert saved.read_text() == "saved\n"  # USR1, not TERM (its trap would not have run), nor KILL
        plane.settle_run("tl")
        w = plane.worker("tl-0")
        assert (w.state, w.reason) == ("Failed", "Stopped at its time limit of 1m")
        assert starts.read_text().split() == ["0"]  # never restarted
    finally:
        plane.close()


def test_a_delete_sends_the_stop_signal_and_waits_the_grace(tmp_path):
    plane = Plane(tmp_path, grace=None, inventory=default_inventory(racks=1, machines_per_rack=1))
    starts, saved = tmp_path / "starts.txt", tmp_path / "checkpoint"
    try:
        plane.engine.submit(gpu_run("gone", ON_USR1, priority=1, stop_signal="USR1"), plane.clock.now())
        until(lambda: starts.exists(), step=plane.step, what="gone to start")
        pid = plane.engine.processes["gone-0"]["pid"]
        plane.engine.delete("gone", plane.clock.now())
        from reconciler.controlplane.executor import process_alive

        until(lambda: not process_alive(pid, None), step=plane.step, what="the worker to end")
        assert saved.read_text() == "saved\n"  # it had its signal and its grace before it ended
    finally:
        plane.close()
