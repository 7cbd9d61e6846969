"""Files and secrets: the server's home is its user's alone, and its token is out of sight.

A token given by ``ASTRA_TOKEN`` or ``--token`` would show in ``/proc/PID/environ`` or
``/proc/PID/cmdline`` to any process of the user (a worker, too): the server starts over without
it, and reads it from a pipe.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.controlplane_api.conftest import TOKEN, LiveServer, until


@pytest.fixture
def live(tmp_path):
    cwd = tmp_path / "work"
    cwd.mkdir()
    server = LiveServer(tmp_path / "home", cwd).start()
    yield server
    server.stop()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_token_is_in_neither_the_environment_nor_the_command_line(live):
    assert live.proc is not None
    pid = live.proc.pid  # exec keeps the pid
    environ = Path(f"/proc/{pid}/environ").read_bytes()
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    assert b"ASTRA_TOKEN" not in environ and TOKEN.encode() not in environ
    assert TOKEN.encode() not in cmdline and b"--token-file" in cmdline
    assert live.api("GET", "/runs").status_code == 200  # and it still knows its token


def test_the_home_database_and_logs_are_private_and_results_are_not(live):
    run = {
        "metadata": {"name": "w"},
        "spec": {
            "task_template": {
                "image": "busybox",
                "command": "sh",
                "args": ["-c", "echo hi; echo out > result.txt"],
                "restart_policy": "Never",
            }
        },
    }
    assert live.api("POST", "/runs", json=run).status_code == 201
    until(lambda: live.api("GET", "/runs/w").json()["status"]["state"] == "Completed", what="the run")
    home = live.home
    assert mode(home) == 0o700
    assert mode(home / "astra.db") == 0o600
    logs = list((home / "logs").rglob("*.log"))
    assert logs and all(mode(p) == 0o600 for p in logs)
    assert mode(home / "logs" / "w") == 0o700
    assert mode(home / "work" / "w" / "result.txt") == 0o644  # the worker's own file, in its run's folder


def test_token_file(tmp_path):
    from reconciler.controlplane.server import ServerError, read_token_file

    f = tmp_path / "t"
    f.write_text("s3cret\nignored\n")
    assert read_token_file(f) == "s3cret"
    f.write_text("\n")
    with pytest.raises(ServerError, match="is empty"):
        read_token_file(f)
    with pytest.raises(ServerError, match="cannot read the token file"):
        read_token_file(tmp_path / "none")
