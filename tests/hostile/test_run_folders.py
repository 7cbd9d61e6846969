"""Each run its own working folder; drives outside astra's home, never a swapped folder (issue 28,
findings 2 and 3).

Before: every worker ran in the server's working folder, read-write, so one run overwrote the
files another read, and replaced a drive's folder there by a symbolic link to astra's home
(the next run mounting the drive found ``astra.db`` and ``token``); with astra's home below the
working folder, a run renamed the folder above it and the next run read the token. Now a run
sees only its own folder (``HOME/work/RUN``) and its drives; a drive's folder is resolved when
it is registered, refused inside (or around) astra's home and the runs' folders, and a folder
swapped for a link since is refused when a worker would mount it.
"""

from __future__ import annotations

import shutil

import pytest

from tests.controlplane_api.conftest import TOKEN, LiveServer
from tests.hostile.test_sandbox import ended, job


@pytest.fixture
def live(tmp_path):
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap is not installed: run scripts/sandbox-local-up.sh (task sandbox:up)")
    cwd = tmp_path / "clone"
    cwd.mkdir()
    (cwd / "config.yaml").write_text("lr: 0.1\n")
    server = LiveServer(tmp_path / "home", cwd, env={"PATH": "/usr/local/bin:/usr/bin:/bin"}).start()
    yield server
    server.stop()


def test_a_run_sees_only_its_own_folder_not_the_server_s_nor_another_run_s(live):
    mine = "echo mine > kept.txt; pwd > where.txt"
    assert live.api("POST", "/runs", json=job("first", mine)).status_code == 201
    assert ended(live, "first")["status"]["state"] == "Completed"
    first = live.home / "work" / "first"
    clone = live.cwd
    attack = "; ".join(
        [
            f"echo overwritten > {clone}/config.yaml 2> tried.txt; ls {clone} >> tried.txt 2>&1",
            f"echo overwritten > {first}/kept.txt 2>> tried.txt; ls {first} >> tried.txt 2>&1",
            "ls -A .. > siblings.txt",
        ]
    )
    assert live.api("POST", "/runs", json=job("second", attack)).status_code == 201
    assert ended(live, "second")["status"]["state"] == "Completed"
    assert (first / "where.txt").read_text() == f"{first}\n"
    assert (first / "kept.txt").read_text() == "mine\n"
    assert (clone / "config.yaml").read_text() == "lr: 0.1\n"
    second = live.home / "work" / "second"
    assert (second / "tried.txt").read_text() == (
        f"ls: cannot access '{clone}': No such file or directory\n"
        f"ls: cannot access '{first}': No such file or directory\n"
    )
    assert (second / "siblings.txt").read_text() == "second\n"  # the other run's folder: not there


def test_a_drive_inside_or_around_astra_s_home_or_the_runs_folders_is_refused(live, tmp_path):
    home = live.home.resolve()
    inside = home / "data"
    inside.mkdir()
    (home / "work").mkdir(exist_ok=True)
    link = tmp_path / "looks-fine"
    link.symlink_to(home / "work")
    cases = {
        str(inside): f"{inside} lies inside astra's home ({home}): give a folder outside it",
        str(link): f"{home / 'work'} lies inside astra's home ({home}): give a folder outside it",
        str(
            tmp_path
        ): f"{tmp_path} holds astra's home ({home}), which no worker may see: give a folder outside it",
    }
    for path, said in cases.items():
        refused = live.api("POST", "/drives", json={"name": "data", "path": path})
        assert (refused.status_code, refused.json()) == (422, [{"path": "path", "message": said}])
    assert live.api("GET", "/drives").json() == {"items": []}


def test_a_drive_s_folder_swapped_for_a_link_to_astra_s_home_is_not_mounted(live, tmp_path):
    shared = tmp_path / "shared"
    data = shared / "data"
    data.mkdir(parents=True)
    made = live.api("POST", "/drives", json={"name": "data", "path": str(data)})
    assert made.status_code == 201, made.text
    ref = {"name": "data", "mount_path": "/data", "mode": "ReadOnly"}
    peek = "ls /data > /dev/null; cat /data/token"
    # the folder itself, then a folder on its way, replaced by a link to astra's home
    data.rmdir()
    data.symlink_to(live.home)
    assert live.api("POST", "/runs", json=job("swapped", peek, ref)).status_code == 201
    run = ended(live, "swapped")["status"]
    assert run["state"] == "Failed"
    worker = live.api("GET", "/runs/swapped/workers").json()["items"][0]
    assert worker["reason"] == (f"the drive at /data: its folder {data} is a symbolic link (exit code 126)")
    data.unlink()
    moved = tmp_path / "elsewhere"
    (moved / "data").mkdir(parents=True)
    shared.rename(tmp_path / "old")
    shared.symlink_to(moved)
    assert live.api("POST", "/runs", json=job("above", peek, ref)).status_code == 201
    assert ended(live, "above")["status"]["state"] == "Failed"
    worker = live.api("GET", "/runs/above/workers").json()["items"][0]
    assert worker["reason"] == (
        f"the drive at /data: its folder {data} is now {moved / 'data'} (a folder on its way was "
        "replaced by a symbolic link); it is not mounted (exit code 126)"
    )
    logs = "".join(p.read_text() for p in (live.home / "logs").rglob("*.log"))
    assert TOKEN not in logs


def test_a_home_below_the_server_s_folder_is_not_exposed_by_a_rename(tmp_path):
    """Finding 3: ``ASTRA_HOME=work/sub/.astra``, the server in ``work/``: run 1 renames ``sub``,
    run 2 reads ``sub2/.astra/`` (its database; the finding's token beside it). Neither is in a
    worker's sight any more."""
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap is not installed: run scripts/sandbox-local-up.sh (task sandbox:up)")
    work = tmp_path / "work"
    home = work / "sub" / ".astra"
    live = LiveServer(home, work, env={"PATH": "/usr/local/bin:/usr/bin:/bin"}).start()
    try:
        rename = f"cd {work} && mv sub sub2; true"  # in the sandbox: its own empty folders, if any
        assert live.api("POST", "/runs", json=job("rename", rename)).status_code == 201
        assert ended(live, "rename")["status"]["state"] == "Completed"
        read = (
            f"cat {work}/sub2/.astra/astra.db {work}/sub/.astra/astra.db > read.txt 2>&1; echo $? >> read.txt"
        )
        assert live.api("POST", "/runs", json=job("read", read)).status_code == 201
        assert ended(live, "read")["status"]["state"] == "Completed"
    finally:
        live.stop()
    assert sorted(p.name for p in work.iterdir()) == ["sub"]
    assert (home / "astra.db").exists()
    said = (home / "work" / "read" / "read.txt").read_text()
    assert said == (
        f"cat: {work}/sub2/.astra/astra.db: No such file or directory\n"
        f"cat: {work}/sub/.astra/astra.db: No such file or directory\n1\n"
    )


def test_runs_folders_lie_under_the_work_root_given(tmp_path):
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap is not installed: run scripts/sandbox-local-up.sh (task sandbox:up)")
    root = tmp_path / "scratch"
    cwd = tmp_path / "clone"
    cwd.mkdir()
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
    live = LiveServer(tmp_path / "home", cwd, env=env, args=("--work-root", str(root))).start()
    try:
        assert live.api("POST", "/runs", json=job("here", "pwd > where.txt")).status_code == 201
        assert ended(live, "here")["status"]["state"] == "Completed"
        inside = live.api("POST", "/drives", json={"name": "d", "path": str(root)})
        assert inside.json() == [
            {
                "path": "path",
                "message": f"{root} lies inside the runs' working folders ({root}): give a folder outside it",
            }
        ]
    finally:
        live.stop()
    assert (root / "here" / "where.txt").read_text() == f"{root / 'here'}\n"
    assert not (live.home / "work").exists()
