"""Bounds on a worker, with words when one is hit (issue 28, finding 9).

Before: 300 processes forked freely, a worker's ``/`` and ``/tmp`` could take half the host's
memory. Now a worker's processes are bounded (``max_processes``, 4,096 when left out) and, where
the server can make cgroups (root here: CI), its memory by ``requested_resources.memory_bytes``,
each said in the worker's reason and log when reached; ``/`` and ``/tmp`` are tmpfs of 1 GiB.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest

from reconciler.controlplane.bounds import find_cgroups
from tests.controlplane_api.conftest import LiveServer
from tests.hostile.test_sandbox import ended, job


@pytest.fixture
def live(tmp_path):
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap is not installed: run scripts/sandbox-local-up.sh (task sandbox:up)")
    cwd = tmp_path / "work"
    cwd.mkdir()
    server = LiveServer(tmp_path / "home", cwd, env={"PATH": "/usr/local/bin:/usr/bin:/bin"}).start()
    yield server
    server.stop()


def _bounded(name: str, script: str, **template) -> dict:
    doc = job(name, script)
    doc["spec"]["task_template"].update(template)
    return doc


def _worker(live: LiveServer, run: str) -> dict:
    return live.api("GET", f"/runs/{run}/workers").json()["items"][0]


def test_a_worker_past_its_processes_is_refused_a_fork_and_told_so(live):
    forks = "for i in $(seq 40); do sleep 3 & done 2> forks.txt"
    assert live.api("POST", "/runs", json=_bounded("forks", forks, max_processes=16)).status_code == 201
    ended(live, "forks")
    said = (live.home / "work" / "forks" / "forks.txt").read_text()
    assert said == "sh: 0: Cannot fork\n"
    worker = _worker(live, "forks")
    end = f" (exit code {worker['exit_code']})"
    if os.geteuid() == 0:  # CI: the server makes each worker a cgroup of its own
        assert find_cgroups() is not None
        reason = worker["reason"]
        assert reason.startswith("Reached its bound of 16 processes (max_processes): ")
        assert reason.endswith(" refused" + end)
        log = next((live.home / "logs" / "forks").glob("*.log")).read_text()
        assert log.endswith(f"astra: {reason.removesuffix(end)}\n")


def test_a_worker_past_its_memory_is_killed_and_told_so(live):
    if os.geteuid() != 0:
        pytest.fail("the memory bound needs cgroups, which only a root server makes here: run as root")
    grow = "python3 -c 'b = b\"x\" * (200 << 20)'"
    doc = _bounded("grow", grow, requested_resources={"cpu_cores": 1, "memory_bytes": "64Mi"})
    assert live.api("POST", "/runs", json=doc).status_code == 201
    assert ended(live, "grow")["status"]["state"] == "Failed"
    assert _worker(live, "grow")["reason"] == (
        "Out of memory: a process was killed at 67108864 bytes (requested_resources.memory_bytes) "
        "(exit code 137)"
    )


def test_a_run_s_processes_bound_is_checked_when_it_is_submitted(live):
    refused = live.api("POST", "/runs", json=_bounded("many", "true", max_processes=0))
    assert refused.status_code == 422
    assert refused.json() == [
        {"path": "spec.task_template.max_processes", "message": "max_processes must be from 1 to 1048576"}
    ]


def test_a_worker_s_root_and_tmp_are_a_gibibyte_and_a_full_one_says_no_space(live):
    size = "stat -f -c '%b %S' / /tmp > sizes.txt"
    assert live.api("POST", "/runs", json=job("sizes", size)).status_code == 201
    assert ended(live, "sizes")["status"]["state"] == "Completed"
    sizes = (live.home / "work" / "sizes" / "sizes.txt").read_text().split("\n")[:2]
    assert [int(b) * int(s) for b, s in (line.split() for line in sizes)] == [1 << 30, 1 << 30]


def test_a_full_tmp_says_no_space_left_on_device():
    """The same bound, small (``Sandbox.tmpfs_bytes``), filled: the write fails in words."""
    from reconciler.sandbox import Sandbox, WorkerUser, opened

    bwrap = shutil.which("bwrap")
    assert bwrap is not None, "bubblewrap is not installed: run scripts/sandbox-local-up.sh"
    worker = WorkerUser("nobody", 65534, 65534) if os.geteuid() == 0 else None
    with tempfile.TemporaryDirectory() as made:
        box = Sandbox(bwrap, worker=worker, tmpfs_bytes=1 << 20)
        argv = box.argv(
            ["sh", "-c", "head -c 2000000 /dev/zero > /tmp/big; ls -l /tmp/big | cut -d' ' -f5"],
            cwd=made,
            env={"PATH": "/usr/bin:/bin"},
        )
        with opened(argv) as (words, fds):
            done = subprocess.run(
                words, capture_output=True, text=True, timeout=60, pass_fds=fds, umask=0o022
            )
    assert "No space left on device" in done.stderr
    assert int(done.stdout) <= 1 << 20


def test_a_worker_s_log_keeps_its_last_part_with_a_line_that_says_it_was_cut(tmp_path):
    """A log past its bound (small here: ``ProcessExecutor.log_bytes``; 100 MiB by default)
    keeps its last half bound of whole lines, under a line that says how much was cut."""
    from reconciler.controlplane.logcap import LOG_BYTES
    from reconciler.controlplane.logtimes import read_since
    from tests.controlplane_api.conftest import Plane
    from tests.controlplane_api.test_api import tiny

    plane = Plane(tmp_path)
    try:
        assert plane.executor.log_bytes == LOG_BYTES == 100 * 1024 * 1024
        plane.executor.log_bytes = 10_000
        lines = "for i in $(seq 1000 3999); do echo line $i; done"  # 3,000 lines of 10 bytes
        plane.engine.submit(tiny("chatty", command=lines), plane.clock.now())
        plane.settle_run("chatty")
        assert str(plane.run("chatty").state) == "Completed"
    finally:
        plane.close()
    log = next((tmp_path / "logs" / "chatty").glob("*.log"))
    top, *kept = log.read_text().splitlines()
    assert top == (
        "astra: the first 25000 bytes of this log were cut: a worker's log keeps its last 10000 "
        "bytes at most (docs/limits.md)"
    )
    assert kept == [f"line {i}" for i in range(3500, 4000)]
    assert read_since(log, 0.0, plane.clock.now()).decode().splitlines()[-1] == "line 3999"
