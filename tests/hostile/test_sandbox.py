"""Workers in a sandbox (bubblewrap), for real: their drives mounted, the server's secrets unseen.

A live ``astra server`` whose home is a project's ``.astra/`` inside the working folder (the
case where hiding it matters), holding a secret in its environment. Its workers write to a
ReadWrite drive, fail to write to a ReadOnly one (EROFS), and find neither astra's home (its
database, its token) nor the server's ``/proc``. Without a sandbox (``ASTRA_BWRAP`` naming a
bwrap that is not there, as on a host without bubblewrap) the server says so once, a run with
drives waits with its reason, and a run without drives runs as before.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.controlplane_api.conftest import TOKEN, LiveServer, until

ROOT = Path(__file__).resolve().parents[2]
SECRET = "AKIA-not-for-workers"


def job(name: str, script: str, *drives: dict, **spec) -> dict:
    template = {
        "image": "busybox",
        "command": "sh",
        "args": ["-c", script],
        "restart_policy": "Never",
        "requested_resources": {"cpu_cores": 1},
    }
    if drives:
        template["datavolume_refs"] = list(drives)
    return {"metadata": {"name": name}, "spec": {"task_template": template, **spec}}


def ended(live: LiveServer, name: str, base: str = "") -> dict:
    """Run ``name`` once ended (``base``: a workspace's path under ``/api``, else the default's)."""

    def done():
        run = live.api("GET", f"{base}/runs/{name}").json()
        return run if run["status"]["state"] in ("Completed", "Failed") else None

    return until(done, what=f"run {name} to end")


@pytest.fixture
def boxed(tmp_path):
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap is not installed: run scripts/sandbox-local-up.sh (task sandbox:up)")
    cwd = tmp_path / "work"
    cwd.mkdir()
    # a laptop's PATH: this machine's puts pyenv's shims first, which need ~/.pyenv (not shown)
    env = {"AWS_SECRET_ACCESS_KEY": SECRET, "PATH": "/usr/local/bin:/usr/bin:/bin"}
    server = LiveServer(cwd / ".astra", cwd, env=env).start()
    yield server
    server.stop()


def test_a_worker_writes_its_readwrite_drive_cannot_write_its_readonly_one_and_sees_no_secret(
    boxed, tmp_path
):
    data = tmp_path / "data"
    data.mkdir()
    (data / "input.txt").write_text("the dataset\n")
    assert boxed.astra("drive", "create", "datasets", "--path", str(data)).returncode == 0
    made = boxed.astra("drive", "create", "results")
    assert made.returncode == 0, made.stderr
    results = boxed.home / "drives" / "results"
    assert f"drive results created in workspace default: {results}" in made.stdout
    assert boxed.proc is not None
    pid, home = boxed.proc.pid, boxed.home
    script = "; ".join(
        [
            "cat /data/input.txt > /results/read.txt",
            "echo x 2> /results/ro.txt > /data/new.txt; echo $? >> /results/ro.txt",
            f"cat /proc/{pid}/environ > /results/environ.txt 2>&1; echo $? >> /results/environ.txt",
            f"ls -A {home} > /results/home.txt 2>&1",
            f"cat {home}/astra.db {home}/token > /results/secrets.txt 2>&1; echo $? >> /results/secrets.txt",
            "env | sort > /results/env.txt",
            "ls /proc | grep -c '^[0-9]' > /results/pids.txt",
        ]
    )
    drives = (
        {"name": "datasets", "mount_path": "/data", "mode": "ReadOnly"},
        {"name": "results", "mount_path": "/results", "mode": "ReadWrite"},
    )
    assert boxed.api("POST", "/runs", json=job("peek", script, *drives)).status_code == 201
    assert ended(boxed, "peek")["status"]["state"] == "Completed"
    assert (results / "read.txt").read_text() == "the dataset\n"
    assert "Read-only file system" in (results / "ro.txt").read_text()
    assert not (data / "new.txt").exists()
    environ = (results / "environ.txt").read_text()
    assert SECRET not in environ and TOKEN not in environ and environ.endswith("1\n")
    # astra's home: in the sandbox, only the way to the run's own folder (HOME/work/peek)
    assert (results / "home.txt").read_text() == "work\n"
    assert "No such file" in (results / "secrets.txt").read_text()
    names = {line.split("=", 1)[0] for line in (results / "env.txt").read_text().splitlines()}
    # CONTRACT §6 and PATH, HOME; PWD is the shell's own
    assert names == {
        "PATH",
        "HOME",
        "RANK",
        "WORLD_SIZE",
        "SLURM_PROCID",
        "SLURM_NTASKS",
        "ASTRAEUS_ATTEMPT",
        "PWD",
    }
    assert int((results / "pids.txt").read_text()) <= 4  # the sandbox's own processes only
    assert (home / "astra.db").exists()  # hidden, not gone


def test_a_drive_in_use_cannot_be_deleted_and_a_run_naming_a_missing_one_waits_for_it(boxed):
    assert boxed.astra("drive", "create", "results").returncode == 0
    ref = {"name": "results", "mount_path": "/results"}
    assert boxed.api("POST", "/runs", json=job("holds", "sleep 600", ref)).status_code == 201
    refused = boxed.astra("drive", "delete", "results")
    assert refused.returncode == 1
    assert "drive 'results' is in use by run holds" in refused.stderr
    missing = boxed.api("POST", "/runs", json=job("lost", "true", {"name": "nope", "mount_path": "/x"}))
    assert missing.status_code == 201
    said = "Drive 'nope' does not exist in workspace default: astra drive create nope --path DIR"
    until(lambda: boxed.api("GET", "/runs/lost").json()["status"]["reason"] == said, what="lost to wait")
    assert boxed.api("DELETE", "/runs/lost").status_code == 200
    assert boxed.api("DELETE", "/runs/holds").status_code == 200
    assert boxed.astra("drive", "delete", "results").returncode == 0
    assert boxed.api("GET", "/drives").json() == {"items": []}


def test_an_array_naming_drives_not_made_yet_waits_and_its_copies_run_once_both_exist(boxed, tmp_path):
    drives = (
        {"name": "datasets", "mount_path": "/data", "mode": "ReadOnly"},
        {"name": "results", "mount_path": "/results", "mode": "ReadWrite"},
    )
    doc = job("sweep", "cat /data/in.txt > /results/$ASTRAEUS_ARRAY_TASK_ID.txt", *drives)
    doc["spec"]["array"] = {"size": 3, "max_parallel": 2}
    made = boxed.api("POST", "/jobs", json=doc)
    assert made.status_code == 201 and made.json()["spec"]["array"] == {"size": 3, "max_parallel": 2}
    said = "Drive 'datasets' does not exist in workspace default: astra drive create datasets --path DIR"
    until(lambda: boxed.api("GET", "/jobs/sweep").json()["status"]["reason"] == said, what="sweep to wait")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "in.txt").write_text("shard\n")
    (tmp_path / "out").mkdir()
    assert boxed.astra("drive", "create", "datasets", "--path", str(tmp_path / "data")).returncode == 0
    assert boxed.astra("drive", "create", "results", "--path", str(tmp_path / "out")).returncode == 0
    assert ended(boxed, "sweep")["status"]["state"] == "Completed"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["0.txt", "1.txt", "2.txt"]


def test_the_laptop_sweep_with_drives_writes_its_results_and_leaves_datasets_as_they_were(boxed, tmp_path):
    datasets = tmp_path / "datasets"
    shutil.copytree(ROOT / "examples" / "laptop-drives" / "datasets", datasets)
    results = tmp_path / "results"
    assert boxed.astra("drive", "create", "datasets", "--path", str(datasets)).returncode == 0
    assert boxed.astra("drive", "create", "results", "--path", str(results)).returncode == 0
    applied = boxed.astra("apply", "-f", str(ROOT / "examples" / "laptop-drives"), "--yes", "--wait")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    files = sorted(p.name for p in results.iterdir())
    assert files == ["000.json", "001.json", "002.json", "003.json"]
    assert json.loads((results / "002.json").read_text()) == {
        "index": 2,
        "size": 4,
        "lr": 0.001,
        "datasets_read_only": True,
    }
    assert sorted(p.name for p in datasets.rglob("*")) == ["code", "sweep.py"]


def test_another_cluster_s_workers_have_the_sandbox_and_their_workspace_s_drives(tmp_path):
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap is not installed: run scripts/sandbox-local-up.sh (task sandbox:up)")
    cwd = tmp_path / "work"
    cwd.mkdir()
    big = tmp_path / "big.yaml"
    big.write_text("machines:\n  - {name: big-1, gpus: 16, cpu_cores: 64, memory_bytes: 512Gi}\n")
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
    live = LiveServer(cwd / ".astra", cwd, env=env, args=("--inventory", f"gpu2={big}")).start()
    try:
        assert live.api("PUT", "/workspaces/team-a/quota", json={"gpus": 16}).status_code == 200
        team = "/v1/orgs/default/workspaces/team-a/clusters/gpu2/api"
        # the default workspace's drive of the same name is another folder, never mounted here
        assert live.astra("drive", "create", "results").returncode == 0
        made = live.api("POST", f"{team}/drives", json={"name": "results"})
        assert made.status_code == 201, made.text
        folder = Path(made.json()["path"])
        assert folder == live.home / "drives" / "default.team-a" / "results"
        ref = {"name": "results", "mount_path": "/results"}
        script = "echo $RANK > /results/out.txt"
        assert live.api("POST", f"{team}/runs", json=job("write", script, ref)).status_code == 201
        assert ended(live, "write", team)["status"]["state"] == "Completed"
        assert (folder / "out.txt").read_text() == "0\n"
        assert list((live.home / "drives" / "results").iterdir()) == []
    finally:
        live.stop()


def test_without_a_sandbox_a_run_with_drives_waits_with_its_reason_and_others_run(tmp_path):
    cwd = tmp_path / "work"
    cwd.mkdir()
    missing = tmp_path / "no" / "bwrap"
    live = LiveServer(tmp_path / "home", cwd, env={"ASTRA_BWRAP": str(missing)}).start()
    try:
        assert live.astra("drive", "create", "results").returncode == 0
        ref = {"name": "results", "mount_path": "/results"}
        assert live.api("POST", "/runs", json=job("boxed", "true", ref)).status_code == 201
        assert live.api("POST", "/runs", json=job("plain", "echo hi > plain.txt")).status_code == 201
        assert ended(live, "plain")["status"]["state"] == "Completed"
        assert (live.home / "work" / "plain" / "plain.txt").read_text() == "hi\n"  # its own folder
        run = live.api("GET", "/runs/boxed").json()["status"]
        assert (run["state"], run["reason"]) == ("Pending", "Drives need a sandbox: install bubblewrap")
        worker = live.api("GET", "/runs/boxed/workers").json()["items"][0]
        assert worker["reason"] == "Drives need a sandbox: install bubblewrap"
    finally:
        live.stop()
    said = (live.home / "test-server.log").read_text()
    assert said.count(f"no sandbox for workers: {missing} was not found") == 1


def test_a_host_whose_user_namespaces_are_off_is_found_out_at_start(tmp_path):
    from reconciler.sandbox import find_sandbox

    refusing = tmp_path / "bwrap"  # what bwrap says where unprivileged user namespaces are off
    refusing.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    refusing.chmod(0o755)
    sandbox, said = find_sandbox(environ={"ASTRA_BWRAP": str(refusing)})
    assert sandbox is None
    assert said == (
        f"no sandbox for workers: {refusing} failed (bwrap: No permissions to creating new namespace); "
        "are unprivileged user namespaces on (sysctl kernel.unprivileged_userns_clone=1)?"
    )
    assert find_sandbox(environ={"ASTRA_BWRAP": ""}) == (
        None,
        "no sandbox for workers: ASTRA_BWRAP is empty; install bubblewrap (apt-get install bubblewrap)",
    )


@pytest.fixture
def shared_tmp():
    """A folder another user can reach (pytest's own are root's alone, 0700)."""
    with tempfile.TemporaryDirectory(dir="/tmp") as made:
        Path(made).chmod(0o755)
        yield Path(made)


def test_as_an_unprivileged_user_the_sandbox_mounts_drives_and_shows_only_its_own_processes(shared_tmp):
    """The same command line bubblewrap runs for a server of an unprivileged user (``nobody``,
    with a user namespace of its own), run as that user."""
    from reconciler.sandbox import Mount, Sandbox, opened

    bwrap = shutil.which("bwrap")
    assert bwrap is not None, "bubblewrap is not installed: run scripts/sandbox-local-up.sh"
    nobody = 65534
    work, ro, rw = (shared_tmp / n for n in ("work", "ro", "rw"))
    for folder in (work, ro, rw):
        folder.mkdir()
        os.chown(folder, nobody, nobody)
    script = "; ".join(
        [
            "id -u",
            "echo x > /ro/x || echo refused",
            "echo y > /rw/y && echo wrote",
            "ls /proc | grep -c '^[0-9]'",
        ]
    )
    argv = Sandbox(bwrap, user_namespace=True).argv(
        ["sh", "-c", script],
        cwd=str(work),
        env={"PATH": "/usr/bin:/bin"},
        mounts=[Mount(str(ro), "/ro", read_only=True), Mount(str(rw), "/rw", read_only=False)],
    )
    with opened(argv) as (words, fds):
        as_nobody = ["setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups", *words]
        done = subprocess.run(as_nobody, capture_output=True, text=True, timeout=60, pass_fds=fds)
    assert done.returncode == 0, done.stderr
    uid, refused, wrote, pids = done.stdout.split("\n")[:4]
    assert (uid, refused, wrote) == (str(nobody), "refused", "wrote")
    assert "Read-only file system" in done.stderr
    assert int(pids) <= 4
    assert (rw / "y").read_text() == "y\n" and (rw / "y").stat().st_uid == nobody
    assert not (ro / "x").exists()
