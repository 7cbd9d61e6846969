"""Drives on the REAL local Slurm (scripts/slurm-local-up.sh): bubblewrap in the job's wrapper.

The local cluster has no pyxis, so its jobs mount their drives in the node's sandbox (bwrap, on
this host, which is the nodes' too); the pyxis form is checked at the script level only
(``test_drives_mapping.py``). The local cluster's jobs run as the user who submits them: root
here, and an unprivileged user (``nobody``) in the last test, whose astra and jobs are that
user's. Fails (never skips) when the cluster is not up, as the other Slurm tests do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.cli.app import run
from reconciler.clusters import Conflict, Rejected
from reconciler.clusters.slurm import SlurmCluster
from reconciler.clusters.slurm.unsupported import NO_DRIVES

from .test_integration import UP_HINT, _cluster_up, doc, final, wait_for

SERVER = "slurm://debug"
NOBODY = 65534
DRIVES = [
    {"name": "datasets", "mount_path": "/data", "mode": "ReadOnly"},
    {"name": "results", "mount_path": "/results", "mode": "ReadWrite"},
]


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder of the shared filesystem (here: /tmp) holding the two drives' folders, which
    any user may reach (pytest's own folders are root's alone)."""
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="astra-drives-") as made:
        root = Path(made)
        root.chmod(0o755)
        (root / "datasets").mkdir()
        (root / "datasets" / "in.txt").write_text("hello\n")
        (root / "results").mkdir()
        yield root


@pytest.fixture
def cluster(shared: Path) -> SlurmCluster:
    problem = _cluster_up()
    if problem is not None:
        pytest.fail(f"The local Slurm cluster is not up: {problem}; {UP_HINT}", pytrace=False)
    made = SlurmCluster.from_url(SERVER, state_dir=shared / "state")
    for name in ("datasets", "results"):
        made.create_drive(name, str(shared / name))
    return made


def with_drives(name: str, script: str, **spec: Any) -> dict[str, Any]:
    template = {"datavolume_refs": DRIVES, "restart_policy": "Never", **spec.pop("task_template", {})}
    return doc(name, script, task_template=template, **spec)


def test_each_array_copy_writes_to_the_read_write_drive_and_the_files_are_there_after(
    cluster: SlurmCluster, shared: Path
):
    cluster.create_run(
        with_drives("drw", 'cat /data/in.txt > "/results/$ASTRAEUS_ARRAY_TASK_ID.txt"', array={"size": 3})
    )
    assert final(cluster, "drw", 90).state == "Completed"
    results = shared / "results"
    assert sorted(p.name for p in results.iterdir()) == ["0.txt", "1.txt", "2.txt"]
    assert {p.read_text() for p in results.iterdir()} == {"hello\n"}
    assert sorted(p.name for p in (shared / "datasets").iterdir()) == ["in.txt"]


def test_a_write_to_the_read_only_drive_fails_with_erofs(cluster: SlurmCluster, shared: Path):
    cluster.create_run(with_drives("dro", "cat /data/in.txt && echo nope > /data/out.txt"))
    done = final(cluster, "dro", 90)
    assert done.state == "Failed"
    log = cluster.logs("dro-0")
    assert "hello\n" in log
    assert "/data/out.txt: Read-only file system" in log
    assert sorted(p.name for p in (shared / "datasets").iterdir()) == ["in.txt"]


def test_every_worker_of_a_gang_mounts_the_drives_on_its_own_node(cluster: SlurmCluster, shared: Path):
    script = 'echo "$RANK of $WORLD_SIZE on $SLURMD_NODENAME" > "/results/rank-$RANK"'
    cluster.create_run(with_drives("dgang", script, task_template={"requested_resources": {"machines": 2}}))
    assert final(cluster, "dgang", 90).state == "Completed"
    said = {p.name: p.read_text() for p in (shared / "results").iterdir()}
    assert said == {"rank-0": "0 of 2 on vm-n1\n", "rank-1": "1 of 2 on vm-n2\n"}


def test_without_pyxis_or_bubblewrap_a_run_with_drives_is_refused_naming_the_field(
    cluster: SlurmCluster, shared: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("ASTRA_BWRAP", "")  # no bwrap on this host, as far as astra is concerned
    bare = SlurmCluster.from_url(SERVER, state_dir=shared / "state")
    with pytest.raises(Rejected) as refused:
        bare.create_run(with_drives("dnone", "true"))
    assert [(e["path"], e["message"]) for e in refused.value.errors] == [
        ("spec.task_template.datavolume_refs", NO_DRIVES.format(why="ASTRA_BWRAP is empty"))
    ]
    assert bare.get_run("dnone") is None


def test_a_drive_in_use_is_not_deleted(cluster: SlurmCluster):
    cluster.create_run(with_drives("dbusy", "sleep 120"))
    try:
        wait_for(
            "it runs", lambda: cluster.get_run("dbusy"), lambda r: r is not None and r.state == "Running", 30
        )
        assert [(d["name"], d["used_by"]) for d in cluster.drives()] == [
            ("datasets", ["dbusy"]),
            ("results", ["dbusy"]),
        ]
        with pytest.raises(Conflict, match="drive 'results' is in use by run dbusy: delete it"):
            cluster.delete_drive("results")
    finally:
        cluster.delete_run("dbusy")
    assert cluster.delete_drive("results")["used_by"] == []
    assert [d["name"] for d in cluster.drives()] == ["datasets"]


@pytest.fixture
def astra(shared: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    problem = _cluster_up()
    if problem is not None:
        pytest.fail(f"The local Slurm cluster is not up: {problem}; {UP_HINT}", pytrace=False)
    monkeypatch.setenv("ASTRA_SLURM_STATE", str(shared / "state"))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.chdir(shared)

    def call(*argv: str) -> tuple[int, str, str]:
        code = run([*argv, "--server", SERVER])
        out, err = capsys.readouterr()
        return code, out, err

    return call


SWEEP = """\
metadata: {name: dsweep}
spec:
  array: {size: 2}
  task_template:
    image: debian:12
    command: sh
    args: [-c, 'cp /data/in.txt "/results/$ASTRAEUS_ARRAY_TASK_ID.txt"']
    time_limit_seconds: 60
    restart_policy: Never
    datavolume_refs:
      - {name: datasets, mount_path: /data, mode: ReadOnly}
      - {name: results, mount_path: /results}
"""


def test_the_plan_refuses_a_drive_the_cluster_does_not_know_then_the_drives_commands_add_it(
    astra, shared: Path, snapshot
):
    (shared / "runs").mkdir()
    (shared / "runs" / "sweep.yaml").write_text(SWEEP)
    state = ["--source", "s", "--state", f"sqlite:///{shared}/state.db"]
    code, out, err = astra("drive", "create", "datasets", "--path", "datasets")
    assert (code, out, err) == (0, f"drive datasets created on {SERVER}: {shared}/datasets\n", "")

    code, out, err = astra("plan", "-f", "runs", *state)
    assert code == 1  # a run the cluster could not take as it is: the plan says so, and why
    planned = out[out.index("+ dsweep") :] + err
    code, out, _ = astra("apply", "-f", "runs", "--yes", *state)
    assert code == 1
    assert SlurmCluster.from_url(SERVER, state_dir=shared / "state").list_runs() == []
    assert {"plan": planned, "apply": out[out.index("+ dsweep") :]} == snapshot

    code, out, err = astra("drive", "create", "results", "--path", str(shared / "results"))
    assert code == 0, err
    code, out, _ = astra("drive", "list")
    width = len(f"{shared}/datasets")
    assert out.splitlines() == [
        f"NAME      {'PATH':<{width}}  USED-BY",
        f"datasets  {shared}/datasets  -",
        f"results   {f'{shared}/results':<{width}}  -",
    ]
    code, out, err = astra("apply", "-f", "runs", "--yes", "--wait", *state)
    assert code == 0, out + err
    assert sorted(p.name for p in (shared / "results").iterdir()) == ["0.txt", "1.txt"]


def test_as_an_unprivileged_user_astra_and_its_jobs_mount_the_drives(shared: Path):
    """astra run by ``nobody`` (its own state and home): ``nobody``'s jobs, in a sandbox with a
    user namespace of their own; the file the job writes is ``nobody``'s."""
    problem = _cluster_up()
    if problem is not None:
        pytest.fail(f"The local Slurm cluster is not up: {problem}; {UP_HINT}", pytrace=False)
    for folder in (shared, shared / "results"):
        os.chown(folder, NOBODY, NOBODY)
    (shared / "runs").mkdir()
    (shared / "runs" / "who.yaml").write_text(
        textwrap.dedent(
            """\
            metadata: {name: dwho}
            spec:
              task_template:
                image: debian:12
                command: sh
                args: [-c, 'id -u > /results/who; (echo x > /data/x) 2> /results/ro-said; cat /data/in.txt']
                time_limit_seconds: 60
                restart_policy: Never
                datavolume_refs:
                  - {name: datasets, mount_path: /data, mode: ReadOnly}
                  - {name: results, mount_path: /results}
            """
        )
    )
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(shared),
        "ASTRA_HOME": str(shared / "home"),
        "ASTRA_SLURM_STATE": str(shared / "state"),
        "NO_COLOR": "1",
    }
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]

    def astra(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*as_nobody, sys.executable, "-m", "reconciler.cli", *argv, "--server", SERVER],
            cwd=shared,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    for name in ("datasets", "results"):
        made = astra("drive", "create", name, "--path", str(shared / name))
        assert made.returncode == 0, made.stderr
    state = f"sqlite:///{shared}/state.db"
    done = astra("apply", "-f", "runs", "--yes", "--wait", "--source", "s", "--state", state)
    assert done.returncode == 0, done.stdout + done.stderr
    who = shared / "results" / "who"
    assert (who.read_text(), who.stat().st_uid) == (f"{NOBODY}\n", NOBODY)
    assert "/data/x: Read-only file system" in (shared / "results" / "ro-said").read_text()
    assert not (shared / "datasets" / "x").exists()


def test_a_drive_on_slurm_is_an_existing_folder_astra_does_not_make(astra, shared: Path):
    code, _, err = astra("drive", "create", "results")
    assert (code, err) == (
        1,
        "astra: error: on Slurm a drive is a folder of the cluster's shared filesystem: give --path FOLDER\n",
    )
    code, _, err = astra("drive", "create", "results", "--path", "nowhere")
    assert (code, err) == (
        1,
        f"astra: error: no folder {shared}/nowhere on this host: on Slurm a drive is a folder of the "
        "cluster's shared filesystem, which astra does not make\n",
    )
    assert not (shared / "nowhere").exists()
    assert astra("drive", "create", "results", "--path", "results")[0] == 0
    code, _, err = astra("drive", "create", "results", "--path", "datasets")
    assert (code, err) == (1, f"astra: error: drive 'results' already exists on {SERVER}: {shared}/results\n")
    code, out, _ = astra("drive", "list", "-o", "json")
    assert json.loads(out) == [{"name": "results", "path": f"{shared}/results", "used_by": []}]
    code, out, _ = astra("drive", "delete", "results")
    assert (code, out) == (0, f"drive results deleted (its folder {shared}/results is left as it is)\n")
    code, _, err = astra("drive", "delete", "results")
    assert (code, err) == (1, f"astra: error: drive 'results' does not exist on {SERVER}\n")
    assert (shared / "results").is_dir()
