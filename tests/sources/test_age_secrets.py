"""Secrets committed encrypted with age (issue 30): ``astra.yaml`` declares them, ``astra watch
--age-identity`` decrypts them and sets them at apply, and its status says ``+ secret NAME`` or
``~ secret NAME (changed; read by RUN)``, never a value; a wrong identity stalls the source (LoadFailed,
naming the file) and nothing of that pass is applied. Encrypted with Debian's ``age``, on a
live ``astra server``."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.controlplane_api.conftest import LiveServer

VALUE = b"hf_age_canary_81b2"
RUN = """\
metadata: {name: uses-token}
spec:
  task_template:
    image: busybox
    command: sh
    args: [-c, 'echo "$HF_TOKEN"; sleep 120']
    restart_policy: Never
    env: {HF_TOKEN: {secret: hf-token}}
"""
ASTRA = """\
sources:
  - name: team
    path: runs
    secrets:
      - {name: hf-token, file: secrets/hf-token.age}
"""


def keygen(path) -> str:
    """A new age identity at ``path``; its recipient."""
    subprocess.run(["age-keygen", "-o", str(path)], check=True, capture_output=True)
    return next(line.split(": ")[1] for line in path.read_text().splitlines() if "public key" in line)


def encrypt(recipient: str, value: bytes, out) -> None:
    subprocess.run(["age", "-r", recipient, "-o", str(out)], input=value, check=True)


@pytest.fixture
def repo(tmp_path):
    if shutil.which("age") is None:
        pytest.fail("age is not installed: run scripts/age-install.sh (task age:install)")
    cwd = tmp_path / "work"
    (cwd / "runs" / "secrets").mkdir(parents=True)
    (cwd / "runs" / "train.yaml").write_text(RUN)
    (cwd / "astra.yaml").write_text(ASTRA)
    server = LiveServer(tmp_path / "home", cwd).start()
    yield server
    server.stop()


def watch_once(live: LiveServer, identity) -> str:
    done = live.astra("watch", "-c", "astra.yaml", "--once", "--age-identity", str(identity))
    assert VALUE not in (done.stdout + done.stderr).encode()
    return done.stdout + done.stderr


def test_an_age_file_is_decrypted_set_at_apply_and_said_by_name_only(repo, tmp_path):
    recipient = keygen(tmp_path / "id.txt")
    encrypt(recipient, VALUE, repo.cwd / "runs" / "secrets" / "hf-token.age")
    said = watch_once(repo, tmp_path / "id.txt")
    assert "team: Ready ReconciliationSucceeded" in said and "; + secret hf-token" in said, said
    assert [s["name"] for s in repo.api("GET", "/secrets").json()["items"]] == ["hf-token"]
    again = watch_once(repo, tmp_path / "id.txt")
    assert "secret" not in again, again  # unchanged: nothing to say
    encrypt(recipient, VALUE + b"-2", repo.cwd / "runs" / "secrets" / "hf-token.age")
    changed = watch_once(repo, tmp_path / "id.txt")
    assert "; ~ secret hf-token (changed; read by uses-token)" in changed, changed
    assert repo.api("GET", "/secrets/hf-token").json()["size"] == len(VALUE) + 2


def test_a_wrong_identity_stalls_the_source_naming_the_file_and_applies_nothing(repo, tmp_path):
    encrypt(keygen(tmp_path / "right.txt"), VALUE, repo.cwd / "runs" / "secrets" / "hf-token.age")
    keygen(tmp_path / "wrong.txt")
    said = watch_once(repo, tmp_path / "wrong.txt")
    assert "team: Stalled LoadFailed: secret hf-token: secrets/hf-token.age does not decrypt" in said, said
    assert repo.api("GET", "/runs").json()["items"] == []
    assert repo.api("GET", "/secrets").json()["items"] == []
    (repo.cwd / "runs" / "secrets" / "hf-token.age").write_bytes(b"not age at all")
    corrupt = watch_once(repo, tmp_path / "right.txt")
    assert "Stalled LoadFailed: secret hf-token: secrets/hf-token.age does not decrypt" in corrupt, corrupt
