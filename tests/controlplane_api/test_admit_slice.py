"""A step admits runs until it has done a slice of that work; the loop takes the next step at once.

A step holds the engine, so every request waits for it: 10,000 runs of 1.3 million array copies
held it for 44 s in one step. A step now admits runs (each whole) until their workers, and
``engine.ADMIT_RUN_COST`` for each run, make ``engine.ADMIT_SLICE``, stops at the next run to
admit, serves no run queued behind it, and says more is to do (``Engine.more``); the server's
loop steps again at once. Runs wait in a workspace at its quota of 0 running runs here, so that
nothing starts.
"""

from __future__ import annotations

from typing import Any

from reconciler.controlplane.engine import ADMIT_SLICE
from reconciler.controlplane.scheduler import Quota

from .conftest import until

HALF = ADMIT_SLICE // 2


def _array(name: str, size: int, priority: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "priority": priority,
            "array": {"size": size},
            "task_template": {
                "image": "busybox",
                "command": "true",
                "requested_resources": {"cpu_cores": 1},
            },
        },
    }


def _copies(plane, name: str) -> int:
    return len(plane.engine.state.run_workers.get(name, ()))


def test_a_step_admits_runs_until_a_slice_of_workers_is_made(plane):
    plane.engine.set_quota("default/default", Quota(None, 0))
    now = plane.clock.now()
    for name in ("a", "b", "c", "d"):
        plane.engine.submit(_array(name, HALF), now)
    plane.step()
    assert [_copies(plane, n) for n in "abcd"] == [HALF, HALF, 0, 0]
    assert plane.engine.more
    assert plane.run("c").state == "Pending"
    plane.step()
    assert [_copies(plane, n) for n in "abcd"] == [HALF] * 4
    assert not plane.engine.more
    reasons = {plane.run(n).reason for n in "abcd"}
    assert reasons == {"Workspace default is at its quota of 0 running runs"}


def test_a_run_larger_than_the_slice_is_admitted_whole(plane):
    plane.engine.set_quota("default/default", Quota(None, 0))
    now = plane.clock.now()
    plane.engine.submit(_array("big", ADMIT_SLICE + 10), now)
    plane.engine.submit(_array("next", 1), now)
    plane.step()
    assert (_copies(plane, "big"), _copies(plane, "next")) == (ADMIT_SLICE + 10, 0)
    plane.step()
    assert _copies(plane, "next") == 1


def test_runs_are_admitted_by_priority_then_submission(plane):
    plane.engine.set_quota("default/default", Quota(None, 0))
    now = plane.clock.now()
    for name in ("a", "b", "c"):
        plane.engine.submit(_array(name, HALF), now)
    plane.engine.submit(_array("urgent", HALF, priority=10), now)
    plane.step()
    assert [_copies(plane, n) for n in ("urgent", "a", "b", "c")] == [HALF, HALF, 0, 0]


def test_the_server_admits_every_run_without_being_asked_again(live):
    """The loop steps while runs remain to admit: the copies of one batch all appear though no
    request wakes it again (a GET does not), where it would else wait a minute for its next look."""
    assert live.api("PUT", "/workspaces/default/quota", json={"runs": 0}).status_code == 200
    runs = [_array(name, HALF) for name in ("a", "b", "c", "d", "e")]
    assert live.api("POST", "/runs:batch", json={"runs": runs}).status_code == 200

    def listed() -> int:
        return live.api("GET", "/workers", params={"limit": 1}).json()["total"]

    assert until(lambda: listed() == 5 * HALF, timeout=30, what="every copy to be listed")
