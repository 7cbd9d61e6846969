"""The issue's watch test as a user runs it: a real ``astra server`` (its own process, its local
executor running real workers) and ``astra watch --git file://…/remote.git --ref main --path runs
--prune`` (``--once``: one pass of the same loop per call, so the test says when a pass happens
instead of sleeping through an interval). A push that changes one word of a Running run's args
is held: the worker's pid is the same, the run's spec the old one, ``astra status`` names the
held replace; the run is replaced by the first pass after it ends; ``astra apply --replace``
replaces at once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.controlplane_api.conftest import LiveServer, until

#: The worker says it started, then runs until the test tells it to end (a file in its folder).
GF = """\
metadata:
  name: gf-train
spec:
  task_template:
    image: python:3.12
    command: sh
    args: ["-c", "echo $0 >> starts; while [ ! -e done ]; do sleep 0.1; done", {word}]
    requested_resources:
      gpu_requests:
        count: 16
"""


@pytest.fixture
def server(tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    live = LiveServer(tmp_path / "home", cwd).start()
    yield live
    live.stop()


def _pids(word: str) -> list[int]:
    """The host's pids of the workers whose args end with ``word`` (the shell itself, not the
    sandbox around it: the worker sees another pid in its own namespace)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if proc.name.isdigit() and argv[0] == b"sh" and argv[-2:] == [word.encode(), b""]:
            found.append(int(proc.name))
    return sorted(found)


def _starts(folder: Path) -> list[str]:
    path = folder / "starts"
    return path.read_text().split() if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_push_changing_a_running_runs_args_holds_the_replace_until_it_ends(repo, server):
    watch = ("watch", "--git", repo.url, "--ref", "main", "--path", "runs", "--prune", "--once")
    folder = server.home / "work" / "gf-train"

    def args() -> list[str]:
        return server.api("GET", "/runs/gf-train").json()["spec"]["task_template"]["args"]

    def state() -> str:
        return server.api("GET", "/runs/gf-train").json()["status"]["state"]

    repo.write("runs/gf-train.yaml", GF.format(word="--lr=1e-4"))
    repo.commit("gf-train")
    repo.push()
    done = server.astra(*watch)
    assert done.returncode == 0, done.stdout + done.stderr
    until(lambda: len(_pids("--lr=1e-4")) == 2 and state() == "Running", what="gf-train's 2 workers to run")
    pids = _pids("--lr=1e-4")  # 16 GPUs: two workers of 8

    repo.write("runs/gf-train.yaml", GF.format(word="--lr=3e-4"))  # one word of its args
    repo.commit("a typo")
    repo.push()
    for _ in range(2):  # every pass while it runs: held, nothing stopped
        done = server.astra(*watch)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "1 replace held until the run ends (gf-train)" in done.stdout + done.stderr
        assert _pids("--lr=1e-4") == pids and state() == "Running"
        assert _starts(folder) == ["--lr=1e-4"] * 2
        assert args()[-1] == "--lr=1e-4"
    status = server.astra("status")
    assert "gf-train is Running (" in status.stdout and "it will be replaced when it ends" in status.stdout

    (folder / "done").write_text("")  # the run ends by itself
    until(lambda: state() == "Completed", what="gf-train to complete")
    (folder / "done").unlink()
    done = server.astra(*watch)
    assert done.returncode == 0 and "1 replaced (gf-train)" in done.stdout + done.stderr, done.stdout
    assert args()[-1] == "--lr=3e-4"
    until(lambda: len(_pids("--lr=3e-4")) == 2 and state() == "Running", what="its new workers")
    new = _pids("--lr=3e-4")
    assert not any(map(_alive, pids))

    repo.write("runs/gf-train.yaml", GF.format(word="--lr=1e-3"))
    repo.commit("another")
    repo.push()
    done = server.astra(*watch)
    assert "1 replace held until the run ends (gf-train)" in done.stdout + done.stderr
    assert all(map(_alive, new)) and args()[-1] == "--lr=3e-4"
    done = server.astra(
        "apply", "--git", repo.url, "--ref", "main", "--path", "runs", "--replace", "gf-train", "-y"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert args()[-1] == "--lr=1e-3"  # at once: the running worker was stopped
    until(lambda: not any(map(_alive, new)), what="the replaced workers to be stopped")
