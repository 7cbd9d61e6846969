"""The canary test of secrets on the REAL local Slurm cluster (issue 30): a run with one env
secret and one secret file prints both into its log; then Slurm's records of the job (``scontrol
show job -d``, ``scontrol write batch_script``, the job completion log that ``sacct -c`` reads:
accounting is off on the local cluster, ``sacct`` says so), Slurm's spool and state folders,
astra's state folder and its own outputs (``plan`` in every format, ``apply``, ``get runs`` in
every format, ``describe``) hold no canary, and the log shows ``***``."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from reconciler.cli.app import run
from reconciler.clusters import Rejected
from reconciler.clusters.slurm import SlurmCluster

from .test_integration import doc, final, wait_for

SERVER = "slurm://debug"
ENV_CANARY = b"hf_canary_ENV_7f3a91"
FILE_CANARY = b"ssh_canary_FILE_5be2c0\nsecond line of the key"
CANARIES = [ENV_CANARY, b"ssh_canary_FILE_5be2c0", b"second line of the key"]
SLURM_DIR = Path("/tmp/slurmtest")

RUN = """metadata: {{name: canary}}
spec:
  task_template:
    image: debian:12
    command: sh
    args: ["-c", "echo env=$HF_TOKEN; cat {key}; echo; stat -c '%a' {key}; {split}"]
    restart_policy: Never
    env:
      HF_TOKEN: {{secret: hf-token}}
      PLAIN: visible
    secret_files:
      - {{name: ssh-key, mount_path: {key}}}
"""


@pytest.fixture
def slurm(slurm_state, capsys):

    def cli(*argv: str) -> str:
        code = run([*argv, "--server", SERVER])
        out, err = capsys.readouterr()
        assert code == 0, out + err
        return out + err

    return SlurmCluster.from_url(SERVER, state_dir=slurm_state), cli


def _holds_canary(data: bytes) -> bool:
    return any(c in data for c in CANARIES)


def _files_with_canary(root: Path) -> list[str]:
    found = []
    for path in root.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink() and _holds_canary(path.read_bytes()):
                found.append(str(path))
        except OSError:
            continue
    return found


def test_a_run_with_secrets_runs_on_slurm_and_no_canary_is_anywhere(slurm, tmp_path: Path):
    cluster, cli = slurm
    cluster.set_secret("hf-token", ENV_CANARY)
    cluster.set_secret("ssh-key", FILE_CANARY)
    key = tmp_path / "keys" / "id_ed25519"
    folder = tmp_path / "runs"
    folder.mkdir()
    split = "printf hf_canary_; printf ENV_7f3a91; echo"  # the value cut across two writes
    (folder / "canary.yaml").write_text(RUN.format(key=key, split=split))
    outputs = [cli("plan", "-f", str(folder), "-o", fmt) for fmt in ("text", "json", "markdown")]
    outputs.append(cli("apply", "-f", str(folder), "--yes"))
    try:
        done = final(cluster, "canary", 90)
        assert done.state == "Completed", done
        job = str(cluster.records.load("canary")["attempts"][0]["job_id"])
        log = cli("logs", "canary-0")
        # both printed, both masked: the env value, the file's lines, the value split over writes
        # (the file's two lines are one value: masked whole)
        assert log.splitlines()[:4] == ["env=***", "***", "400", "***"], log
        assert "masking is on" in log
        assert list(cluster.secrets.jobs.iterdir()) == []  # the job's wrapper read and removed its file
        assert not key.exists()  # the file was the sandbox's own, never on the node's disk
        outputs += [cli("get", "runs", "-o", fmt) for fmt in ("table", "wide", "json", "yaml")]
        outputs += [cli("get", "runs", "canary", "-o", "json"), cli("describe", "run", "canary")]
        for text in outputs:
            assert not _holds_canary(text.encode()), text
        shown = subprocess.run(["scontrol", "show", "job", "-d", job], capture_output=True, check=True).stdout
        script = subprocess.run(
            ["scontrol", "write", "batch_script", job, "-"], capture_output=True, check=True
        ).stdout
        assert b"hf-token" in script or b"ASTRA_SECRET_FILE" in script  # the script, read back whole
        sacct = subprocess.run(["sacct", "-j", job], capture_output=True)
        assert b"accounting storage is disabled" in sacct.stdout + sacct.stderr  # said, not assumed
        jobcomp = subprocess.run(["sacct", "-c", "-j", job, "-P", "-o", "all"], capture_output=True).stdout
        for record in (shown, script, jobcomp):
            assert not _holds_canary(record), record
        assert _files_with_canary(SLURM_DIR / "spool") == []  # slurmctld's state, slurmd's spool
        assert _files_with_canary(SLURM_DIR / "log") == []
        assert _files_with_canary(tmp_path / "state") == []  # records, logs, sealed values
        assert not _holds_canary(str(os.environ).encode())  # nothing reached sbatch's environment
        sealed = tmp_path / "state" / "secrets"
        assert stat.S_IMODE(sealed.stat().st_mode) == 0o700
        assert {stat.S_IMODE(p.stat().st_mode) for p in sealed.iterdir()} == {0o600}
    finally:
        cli("delete", "canary", "--yes")


WAITER = """metadata: {name: waiter}
spec:
  array: {size: 2}
  task_template:
    image: debian:12
    command: sh
    args: ["-c", "echo a=$A b=$B"]
    restart_policy: Never
    env:
      A: {secret: tok-a}
      B: {secret: tok-b}
"""


def _missing(name: str) -> str:
    return f"Secret {name!r} does not exist on {SERVER}: astra secret set {name} --server {SERVER}"


def _held_job(cluster: SlurmCluster, name: str) -> str:
    """``STATE REASON`` of the run's last job as squeue says (an array's pending copies: one row)."""
    job = str(cluster.records.load(name)["attempts"][-1]["job_id"])
    rows = subprocess.run(
        ["squeue", "-h", "-j", job, "-o", "%T %r"], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    return rows[0]


def test_a_run_naming_a_secret_not_set_waits_held_and_starts_once_it_is_set(slurm, tmp_path: Path):
    """Created, not refused: Pending in words, its job held in Slurm's queue and no secrets file
    written; a secret deleted while it waits keeps it waiting; once both are set it runs, masked."""
    cluster, cli = slurm
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "waiter.yaml").write_text(WAITER)
    assert f"would wait: {_missing('tok-a')}" in cli("plan", "-f", str(folder))
    assert "1 created" in cli("apply", "-f", str(folder), "--yes")
    value = tmp_path / "value"
    try:
        waiting = cluster.get_run("waiter")
        assert (waiting.state, waiting.reason) == ("Pending", _missing("tok-a"))
        assert [(w.state, w.reason) for w in cluster.workers("waiter")] == [
            ("Pending", _missing("tok-a"))
        ] * 2
        assert f"Reason:    {_missing('tok-a')}" in cli("describe", "run", "waiter")
        assert _missing("tok-a") in cli("get", "runs", "-o", "json")
        assert _held_job(cluster, "waiter") == "PENDING JobHeldUser"
        assert not cluster.secrets.jobs.exists() or list(cluster.secrets.jobs.iterdir()) == []

        value.write_bytes(b"alpha_canary")
        said = cli("secret", "set", "tok-a", "--from-file", str(value))
        assert "created" in said and "released" not in said
        assert cluster.get_run("waiter").reason == _missing("tok-b")  # one of two: still held
        cli("secret", "delete", "tok-a", "--force")  # deleted while it waits
        value.write_bytes(b"beta_canary")
        cli("secret", "set", "tok-b", "--from-file", str(value))
        assert cluster.get_run("waiter").reason == _missing("tok-a")  # never released without it
        assert _held_job(cluster, "waiter") == "PENDING JobHeldUser"

        value.write_bytes(b"alpha_canary")
        said = cli("secret", "set", "tok-a", "--from-file", str(value))
        assert said.splitlines()[1:] == [
            "read by waiter: each job submitted from now on reads the new value",
            "released waiter, which waited for it",
        ]
        done = final(cluster, "waiter", 60)
        assert done.state == "Completed", done
        for rank in (0, 1):
            log = cli("logs", f"waiter-{rank}")
            assert log.splitlines()[0] == "a=*** b=***", log
            assert "canary" not in log
        assert list(cluster.secrets.jobs.iterdir()) == []  # each copy's wrapper read and removed its file
    finally:
        cli("delete", "waiter", "--yes")


def test_a_restart_whose_secret_was_deleted_waits_held_until_it_is_set_again(slurm, tmp_path: Path):
    """The secret deleted (``--force``) while the run's first attempt failed: the restart astra
    resubmits is held in the same words, not refused (nor run without its value)."""
    cluster, cli = slurm
    marker = tmp_path / "tried"
    cluster.set_secret("tok", b"first_canary")
    script = f"echo t=$T; [ -e {marker} ] && exit 0; touch {marker}; exit 1"  # OnFailure: the default
    cluster.create_run(doc("again", script, task_template={"env": {"T": {"secret": "tok"}}}))
    try:
        job = str(cluster.records.load("again")["attempts"][0]["job_id"])
        wait_for("the first attempt ends", lambda: cluster.commands.live([job]), lambda left: left == [], 60)
        cli("secret", "delete", "tok", "--force")
        waiting = cluster.get_run("again")  # judged now: failed, resubmitted held
        assert (waiting.state, waiting.reason) == ("Pending", _missing("tok"))
        attempts = cluster.records.load("again")["attempts"]
        assert len(attempts) == 2 and attempts[1]["held"] is True
        assert _held_job(cluster, "again") == "PENDING JobHeldUser"
        cluster.set_secret("tok", b"second_canary")
        done = final(cluster, "again", 90)
        assert (done.state, cluster.records.load("again")["attempts"][1].get("held")) == ("Completed", None)
        assert [line for line in cli("logs", "again-0").splitlines() if line.startswith("t=")] == ["t=***"]
    finally:
        cli("delete", "again", "--yes")


def test_the_loop_sets_age_secrets_on_a_slurm_cluster(tmp_path: Path):
    """``astra watch --age-identity`` plans and sets a source's secrets with the same two calls
    as on an Astraeus server; sealed, never in the clear on disk. Without an identity, the
    plan says in words that a Slurm cluster opens no age file."""
    from reconciler.git.agesecrets import AgeSecretError
    from reconciler.loop.declared import Declared, said
    from reconciler.loop.secrets import SourceSecrets
    from tests.sources.test_age_secrets import encrypt, keygen

    cluster = SlurmCluster("debug", state_dir=tmp_path / "state", images="host")
    folder = tmp_path / "repo"
    folder.mkdir()
    identity = tmp_path / "key.txt"
    recipient = keygen(identity)
    encrypt(recipient, ENV_CANARY, folder / "hf.age")
    declared = Declared("team", secrets=SourceSecrets([("hf-token", "hf.age")], identity=str(identity)))

    planned = declared.plan(cluster, str(folder))
    assert said(planned.resources) == ["+ secret hf-token"]
    declared.apply(cluster, planned.resources, planned.values)
    assert cluster.secrets.read("hf-token") == ENV_CANARY
    assert said(declared.plan(cluster, str(folder)).resources) == []  # unchanged: nothing said
    encrypt(recipient, b"new", folder / "hf.age")
    assert said(declared.plan(cluster, str(folder)).resources) == ["~ secret hf-token (changed)"]
    assert _files_with_canary(tmp_path / "state") == []

    unopened = Declared("team", secrets=SourceSecrets([("hf-token", "hf.age")], identity=None))
    with pytest.raises(AgeSecretError) as refused:
        unopened.plan(cluster, str(folder))
    assert str(refused.value) == (
        "hf.age sealed with age, and the server said: slurm://debug opens no age file: "
        "give --age-identity FILE to decrypt it"
    )


def test_a_secret_a_run_reads_is_not_deleted_without_force(slurm, tmp_path: Path):
    cluster, cli = slurm
    cluster.set_secret("tok", b"v")
    cluster.create_run(doc("reader", "sleep 30", task_template={"env": {"T": {"secret": "tok"}}}))
    try:
        assert "reader" in cli("secret", "list")
        with pytest.raises(Rejected) as refused:
            cluster.delete_secret("tok")
        assert "secret 'tok' is read by reader: delete those runs or give --force" in str(refused.value)
        assert cli("secret", "delete", "tok", "--force") == f"secret tok deleted from {SERVER}\n"
    finally:
        cli("delete", "reader", "--yes")
