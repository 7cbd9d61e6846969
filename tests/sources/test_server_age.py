"""The server's own age identity (issue 30): ``astra server --age-identity FILE`` opens the age
files of a source whose watch holds no identity, so the key stays with the cluster (as Flux's
kustomize-controller keeps its sops-age key in the cluster) and the watch sends them still
sealed (``POST /secrets:plan``'s ``sealed``, ``PUT /secrets/{name}`` as ``application/age``).
A server without one, or with another, says so in words naming the file: the source is
LoadFailed and nothing of its commit is applied. Encrypted with Debian's ``age``, on a live
``astra server``."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.controlplane_api import conftest as api_conftest
from tests.controlplane_api.conftest import ROOT, LiveServer
from tests.sources.test_age_secrets import ASTRA, RUN, VALUE, encrypt, keygen


@pytest.fixture(autouse=True)
def _patient_start(monkeypatch):
    """A server's start waits up to 3 minutes (not 1): these tests start several, on a machine
    shared by many test runs. Only the wait for ``/healthz`` is longer; nothing is slept."""
    monkeypatch.setattr(api_conftest, "DEADLINE", 180.0)


@pytest.fixture
def work(tmp_path):
    if shutil.which("age") is None:
        pytest.fail("age is not installed: run scripts/age-install.sh (task age:install)")
    cwd = tmp_path / "work"
    (cwd / "runs" / "secrets").mkdir(parents=True)
    (cwd / "runs" / "train.yaml").write_text(RUN)
    (cwd / "astra.yaml").write_text(ASTRA)
    return cwd


def said(live: LiveServer, *args: str) -> str:
    done = live.astra(*args)
    out = done.stdout + done.stderr
    assert VALUE.decode() not in out
    return out


def test_a_watch_without_an_identity_sends_its_secrets_sealed_and_the_server_opens_them(work, tmp_path):
    identity = tmp_path / "server-id.txt"
    encrypt(keygen(identity), VALUE, work / "runs" / "secrets" / "hf-token.age")
    live = LiveServer(tmp_path / "home", work, args=("--age-identity", str(identity))).start()
    try:
        out = said(live, "watch", "-c", "astra.yaml", "--once")
        assert "team: Ready ReconciliationSucceeded" in out and "; + secret hf-token" in out, out
        assert live.api("GET", "/secrets/hf-token").json()["size"] == len(VALUE)
        # the value the server opened is the one in the file: decrypted here, it plans as unchanged
        again = said(live, "plan", "-c", "astra.yaml", "--age-identity", str(identity))
        assert "secret" not in again, again
        assert "secret" not in said(live, "watch", "-c", "astra.yaml", "--once")
    finally:
        live.stop()


def test_a_server_without_the_identity_says_so_naming_the_file_and_nothing_is_applied(work, tmp_path):
    encrypt(keygen(tmp_path / "right.txt"), VALUE, work / "runs" / "secrets" / "hf-token.age")
    keygen(tmp_path / "other.txt")
    live = LiveServer(tmp_path / "home", work).start()
    try:
        out = said(live, "watch", "-c", "astra.yaml", "--once")
        assert "team: Stalled LoadFailed: secrets/hf-token.age sealed with age" in out, out
        assert "the server holds no age identity to open it: start it with astra server --age-identity" in out
        assert live.api("GET", "/runs").json()["items"] == []
        assert live.api("GET", "/secrets").json()["items"] == []
    finally:
        live.stop()
    other = LiveServer(tmp_path / "home2", work, args=("--age-identity", str(tmp_path / "other.txt"))).start()
    try:
        out = said(other, "watch", "-c", "astra.yaml", "--once")
        assert "secret hf-token does not decrypt with the server's age identity" in out, out
        assert other.api("GET", "/runs").json()["items"] == []
    finally:
        other.stop()


def test_a_server_given_an_identity_it_cannot_read_does_not_start(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "reconciler.cli",
            "server",
            "--port",
            "0",
            "--age-identity",
            str(tmp_path / "nope"),
        ],
        cwd=tmp_path,
        env={"ASTRA_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert f"--age-identity: cannot read the age identity {tmp_path / 'nope'}" in done.stderr, done.stderr
