"""Secrets on the REAL local Slurm cluster beyond one machine (issue 30): a run of two machines,
a run of two worker groups (one heterogeneous job), and a secret file with a drive. Each prints
its env secret and its secret file on every node it runs on, into logs that show ``***``; then
Slurm's records of its jobs (``scontrol show job -d``, ``scontrol write batch_script``, the job
completion log), Slurm's spool, state and logs, astra's state folder and its outputs hold no
canary (``test_secrets.py`` holds the one-machine canary, whose checks these repeat)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.cli.app import run
from reconciler.clusters.slurm import SlurmCluster

from .test_integration import final, wait_for
from .test_secrets import CANARIES, ENV_CANARY, FILE_CANARY, SLURM_DIR, _files_with_canary, _holds_canary

SERVER = "slurm://debug"
#: What each worker prints: its node, both values (the env one also split across two writes),
#: the file's mode, and how many of the variables that carried the values reached it.
PRINT = (
    "echo node=$SLURMD_NODENAME; echo env=$HF_TOKEN; cat {key}; echo; stat -c %a {key}; "
    "printf hf_canary_; printf ENV_7f3a91; echo; echo carriers=$(env | grep -c '^ASTRA_.*SECRET')"
)


@pytest.fixture
def slurm(slurm_state: Path, capsys: pytest.CaptureFixture[str]):
    def cli(*argv: str) -> str:
        code = run([*argv, "--server", SERVER])
        out, err = capsys.readouterr()
        assert code == 0, out + err
        return out + err

    cluster = SlurmCluster.from_url(SERVER, state_dir=slurm_state)
    cluster.set_secret("hf-token", ENV_CANARY)
    cluster.set_secret("ssh-key", FILE_CANARY)
    return cluster, cli


def _template(key: Path | str, **more: object) -> dict[str, object]:
    return {
        "image": "debian:12",
        "command": "sh",
        "args": ["-c", PRINT.format(key=key)],
        "restart_policy": "Never",
        "env": {"HF_TOKEN": {"secret": "hf-token"}, "PLAIN": "visible"},
        "secret_files": [{"name": "ssh-key", "mount_path": str(key)}],
        **more,
    }


def _printed(log: str) -> list[str]:
    """A worker's log without its node's line: what each worker must print alike."""
    lines = log.splitlines()
    assert lines[0].startswith("node="), log
    return lines[1:6]


MASKED = ["env=***", "***", "400", "***", "carriers=0"]


def _nothing_anywhere(cluster: SlurmCluster, cli: Callable[..., str], name: str, tmp_path: Path) -> None:
    """No canary in Slurm's records of the run's jobs, its spool, state and logs, astra's state
    folder or outputs; the job's file read and removed (``test_secrets``' checks, every job)."""
    outputs = [cli("get", "runs", "-o", fmt) for fmt in ("table", "wide", "json", "yaml")]
    outputs += [cli("describe", "run", name)]
    for text in outputs:
        assert not _holds_canary(text.encode()), text
    for attempt in cluster.records.load(name)["attempts"]:
        job = str(attempt["job_id"])
        shown = subprocess.run(["scontrol", "show", "job", "-d", job], capture_output=True, check=True).stdout
        script = subprocess.run(
            ["scontrol", "write", "batch_script", job, "-"], capture_output=True, check=True
        ).stdout
        assert b"--carry" in script  # the script, read back whole: the batch step hands the values on
        jobcomp = subprocess.run(["sacct", "-c", "-j", job, "-P", "-o", "all"], capture_output=True).stdout
        for record in (shown, script, jobcomp):
            assert not _holds_canary(record), record
    assert _files_with_canary(SLURM_DIR / "spool") == []
    assert _files_with_canary(SLURM_DIR / "log") == []
    assert _files_with_canary(tmp_path / "state") == []
    assert list(cluster.secrets.jobs.iterdir()) == []


def _nodes() -> set[str]:
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, check=True)
    return {f"node={n}" for n in out.stdout.split()}


def test_a_run_of_two_machines_reads_both_secrets_on_each_node_and_no_canary_is_anywhere(
    slurm, tmp_path: Path
):
    cluster, cli = slurm
    key = tmp_path / "keys" / "id_ed25519"
    cluster.create_run(
        {
            "metadata": {"name": "two"},
            "spec": {"task_template": _template(key, requested_resources={"machines": 2})},
        }
    )
    try:
        done = final(cluster, "two", 90)
        assert done.state == "Completed", done
        logs = [cli("logs", f"two-{rank}") for rank in (0, 1)]
        assert {log.splitlines()[0] for log in logs} == _nodes()  # one worker on each node
        for log in logs:
            assert _printed(log) == MASKED, log
        assert not key.exists()  # each node's file was its sandbox's own
        _nothing_anywhere(cluster, cli, "two", tmp_path)
    finally:
        cli("delete", "two", "--yes")


def test_a_run_of_two_worker_groups_reads_both_secrets_in_each_group_and_no_canary_is_anywhere(
    slurm, tmp_path: Path
):
    """A gang of two groups is one heterogeneous job, a group on each node: one file for the
    job, a part per group; each group's tasks take theirs and shed the other's."""
    cluster, cli = slurm
    keys = [tmp_path / "a" / "key", tmp_path / "b" / "key"]
    groups = [
        {"name": name, "replicas": 1, "task_template": _template(key)}
        for name, key in zip("ab", keys, strict=True)
    ]
    cluster.create_run({"metadata": {"name": "het"}, "spec": {"start": "Gang", "task_groups": groups}})
    try:
        done = final(cluster, "het", 90)
        assert done.state == "Completed", done
        assert cluster.records.load("het")["kind"] == "hetjob"
        logs = [cli("logs", f"het-{name}-0") for name in "ab"]
        assert {log.splitlines()[0] for log in logs} == _nodes()
        for log in logs:
            assert _printed(log) == MASKED, log
        _nothing_anywhere(cluster, cli, "het", tmp_path)
    finally:
        cli("delete", "het", "--yes")


def test_a_secret_file_with_a_drive_is_mounted_in_the_drives_sandbox(slurm, tmp_path: Path):
    """One sandbox mounts both: the drive, and the file at a folder that does not exist on the
    node (``/astra-keys``: the sandbox's own root is a tmpfs)."""
    cluster, cli = slurm
    data = Path("/tmp") / f"astra-h30m-drive-{tmp_path.name}"
    data.mkdir(exist_ok=True)
    (data / "in.txt").write_text("from the drive\n")
    try:
        cluster.create_drive("datasets", str(data))
        template = _template(
            "/astra-keys/id",
            datavolume_refs=[{"name": "datasets", "mount_path": "/data", "mode": "ReadOnly"}],
        )
        template["args"] = ["-c", "cat /data/in.txt; " + PRINT.format(key="/astra-keys/id")]
        cluster.create_run({"metadata": {"name": "drv"}, "spec": {"task_template": template}})
        try:
            done = final(cluster, "drv", 90)
            assert done.state == "Completed", done
            log = cli("logs", "drv-0")
            assert log.splitlines()[0] == "from the drive", log
            assert _printed("\n".join(log.splitlines()[1:])) == MASKED, log
            assert not Path("/astra-keys").exists()
            assert _files_with_canary(tmp_path / "state") == []
            assert list(cluster.secrets.jobs.iterdir()) == []
        finally:
            cli("delete", "drv", "--yes")
    finally:
        (data / "in.txt").unlink()
        data.rmdir()


def test_the_canaries_are_what_the_one_machine_test_checks():
    assert ENV_CANARY in CANARIES and FILE_CANARY.split(b"\n")[0] in CANARIES


def test_a_groups_restart_whose_secret_was_deleted_waits_held_until_it_is_set_again(slurm, tmp_path: Path):
    """As a unit's restart (``test_secrets.py``): the secret deleted while the first attempt
    failed, the restart of the heterogeneous job is held in words, and runs once it is set."""
    cluster, cli = slurm
    cluster.set_secret("tok", b"first_canary")
    marker = tmp_path / "tried"
    script = f"echo t=$T; [ -e {marker} ] && exit 0; touch {marker}; exit 1"
    template = {
        "image": "debian:12",
        "command": "sh",
        "args": ["-c", script],
        "env": {"T": {"secret": "tok"}},
    }
    groups = [{"name": n, "replicas": 1, "task_template": template} for n in "ab"]
    spec = {"start": "Gang", "on_failure": "RestartJob", "task_groups": groups}
    cluster.create_run({"metadata": {"name": "gagain"}, "spec": spec})
    try:
        job = str(cluster.records.load("gagain")["attempts"][0]["job_id"])
        wait_for("the first attempt ends", lambda: cluster.commands.live([job]), lambda left: left == [], 60)
        cli("secret", "delete", "tok", "--force")
        missing = f"Secret 'tok' does not exist on {SERVER}: astra secret set tok --server {SERVER}"
        waiting = cluster.get_run("gagain")  # judged now: failed, resubmitted held
        assert (waiting.state, waiting.reason) == ("Pending", missing)
        attempts = cluster.records.load("gagain")["attempts"]
        assert len(attempts) == 2 and attempts[1]["held"] is True
        assert list(cluster.secrets.jobs.iterdir()) == []  # no file before the value
        cluster.set_secret("tok", b"second_canary")
        done = final(cluster, "gagain", 90)
        assert done.state == "Completed", done
        assert cluster.records.load("gagain")["attempts"][1].get("held") is None
        assert list(cluster.secrets.jobs.iterdir()) == []
        assert "t=***" in cli("logs", "gagain-a-0").splitlines()
    finally:
        cli("delete", "gagain", "--yes")


def test_worker_groups_of_one_job_each_read_their_own_file_and_no_canary_is_anywhere(slurm, tmp_path: Path):
    """Groups ordered by ``start_after`` are one job per group, each with its own file (named by
    the group's index); each group's workers print both values, masked."""
    cluster, cli = slurm
    groups = [
        {"name": "a", "replicas": 2, "task_template": _template(tmp_path / "a" / "key")},
        {"name": "b", "replicas": 1, "start_after": "a", "task_template": _template(tmp_path / "b" / "key")},
    ]
    cluster.create_run({"metadata": {"name": "grp"}, "spec": {"task_groups": groups}})
    try:
        done = final(cluster, "grp", 90)
        assert done.state == "Completed", done
        assert cluster.records.load("grp")["kind"] == "groups"
        for worker in ("grp-a-0", "grp-a-1", "grp-b-0"):
            log = cli("logs", worker)
            assert _printed(log) == MASKED, log
        _nothing_anywhere(cluster, cli, "grp", tmp_path)
    finally:
        cli("delete", "grp", "--yes")
