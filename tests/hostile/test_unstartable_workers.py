"""A worker that cannot be started ends Failed in words, alone: the rest of the tick goes on.

Before, a NUL in an argument made ``Popen`` raise ``ValueError``; the executor caught only
``OSError``, the tick aborted halfway, and every worker started in it stayed ``Running`` with no
process. Runs are submitted to the engine directly here, as a database written before the spec
limits existed would hold them (the API refuses such a spec now: tests/hostile/test_spec_limits.py).
"""

from __future__ import annotations

from tests.controlplane_api.conftest import Plane
from tests.controlplane_api.test_api import tiny


def test_a_nul_in_an_argument_fails_that_worker_and_the_others_run(tmp_path):
    plane = Plane(tmp_path)
    try:
        bad = tiny("bad", command="echo \x00")
        bad["spec"]["task_template"]["restart_policy"] = "Never"
        plane.engine.submit(tiny("before", command="echo before"), plane.clock.now())
        plane.engine.submit(bad, plane.clock.now())
        plane.engine.submit(tiny("after", command="echo after"), plane.clock.now())
        for name in ("before", "bad", "after"):
            plane.settle_run(name)
        worker = plane.worker("bad-0")
        assert (str(worker.state), worker.exit_code) == ("Failed", 126)
        assert worker.reason == "Could not start 'sh': embedded null byte (exit code 126)"
        assert str(plane.run("bad").state) == "Failed"
        assert {n: str(plane.run(n).state) for n in ("before", "after")} == {
            "before": "Completed",
            "after": "Completed",
        }
        log = tmp_path / "logs" / "bad" / "bad-0.1.log"
        assert "embedded null byte" in log.read_text()
    finally:
        plane.close()


def test_a_command_that_is_a_folder_says_so(tmp_path):
    plane = Plane(tmp_path)
    try:
        doc = tiny("dir")
        doc["spec"]["task_template"].update(command=str(tmp_path), args=[])
        plane.engine.submit(doc, plane.clock.now())
        plane.settle_run("dir")
        worker = plane.worker("dir-0")
        assert worker.reason == f"Could not start {str(tmp_path)!r}: Permission denied (exit code 126)"
    finally:
        plane.close()
