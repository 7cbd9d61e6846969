"""What astra.yaml declares beside the runs, planned and applied against a live ``astra server``
(issues 30 and 34): ``astra plan -c astra.yaml --age-identity FILE`` says ``+ secret NAME`` and
``+ alert NAME`` (text, JSON and markdown: never the value), ``astra apply -c`` sets them through
the API, an alert's change is ``~ alert NAME`` with its fields, ``- alert NAME`` only with prune
and never for an alert made by ``astra alert create``; a wrong identity is a LoadFailed naming the
file for plan and apply, and nothing is applied; and a watch pass from a local bare git repository
creates the alert its source declares. Age files are encrypted with Debian's ``age``."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.controlplane_api import conftest as api_conftest
from tests.controlplane_api.conftest import LiveServer
from tests.sources.test_age_secrets import RUN, encrypt, keygen

VALUE = b"hf_declared_canary_5e1d"
ASTRA = """\
sources:
  - name: team
    path: runs
    secrets:
      - {{name: hf-token, file: secrets/hf-token.age}}
    alerts:{alerts}
"""
FAILURES = """
      - name: failures
        sink: {kind: slack, url: slack-url}
        events: [run.failed]
        severity: SEVERITY
"""


def astra_yaml(severity: str | None = "error") -> str:
    return ASTRA.format(alerts=FAILURES.replace("SEVERITY", severity) if severity else " []")


@pytest.fixture(autouse=True)
def _patient_start(monkeypatch):
    """A server's start waits up to 3 minutes (not 1): these tests start several, on a machine
    shared by many test runs. Only the wait for ``/healthz`` is longer; nothing is slept."""
    monkeypatch.setattr(api_conftest, "DEADLINE", 180.0)


@pytest.fixture
def live(tmp_path):
    if shutil.which("age") is None:
        pytest.fail("age is not installed: run scripts/age-install.sh (task age:install)")
    cwd = tmp_path / "work"
    (cwd / "runs" / "secrets").mkdir(parents=True)
    (cwd / "runs" / "train.yaml").write_text(RUN)
    (cwd / "astra.yaml").write_text(astra_yaml())
    server = LiveServer(tmp_path / "home", cwd).start()
    yield server
    server.stop()


def said(live: LiveServer, *args: str, code: int = 0, stdout: bool = False) -> str:
    """What the command printed (``stdout``: its standard output alone), which never holds the value."""
    done = live.astra(*args)
    out = done.stdout + done.stderr
    assert VALUE.decode() not in out
    assert done.returncode == code, out
    return done.stdout if stdout else out


def test_plan_and_apply_set_the_declared_secrets_and_alerts_and_say_their_names(live, tmp_path):
    identity = tmp_path / "id.txt"
    recipient = keygen(identity)
    encrypt(recipient, VALUE, live.cwd / "runs" / "secrets" / "hf-token.age")
    cfg = ["-c", "astra.yaml", "--age-identity", str(identity)]
    text = said(live, "plan", *cfg)
    assert "+ alert failures\n+ secret hf-token\n" in text, text
    assert "secrets and alerts: 2 to create." in text, text
    data = json.loads(said(live, "plan", *cfg, "-o", "json", stdout=True))
    assert [(r["kind"], r["name"], r["action"]) for r in data["resources"]] == [
        ("alert", "failures", "create"),
        ("secret", "hf-token", "create"),
    ]
    assert "+ secret hf-token" in said(live, "plan", *cfg, "-o", "markdown")
    said(live, "plan", *cfg, "--out", "plan.json")
    assert VALUE not in (live.cwd / "plan.json").read_bytes()
    refused = said(live, "apply", "plan.json", "--yes", code=1)
    assert "this plan sets secrets, and a saved plan holds no secret's value" in refused, refused
    done = said(live, "apply", "plan.json", *cfg, "--yes")
    assert "alert failures: created\nsecret hf-token: created\n" in done, done
    [rule] = live.api("GET", "/alerts").json()["items"]
    assert (rule["name"], rule["declared_by"], rule["severity"]) == ("failures", "team", "error")
    assert [s["name"] for s in live.api("GET", "/secrets").json()["items"]] == ["hf-token"]
    again = said(live, "plan", *cfg)
    assert "secret" not in again and "alert" not in again, again  # unchanged: nothing said

    encrypt(recipient, VALUE + b"2", live.cwd / "runs" / "secrets" / "hf-token.age")
    (live.cwd / "astra.yaml").write_text(astra_yaml("warning"))
    changed = said(live, "plan", *cfg)
    assert '~ alert failures\n    severity: "error" -> "warning"\n~ secret hf-token (changed' in changed, (
        changed
    )
    said(live, "apply", *cfg, "--yes")
    assert live.api("GET", "/alerts").json()["items"][0]["severity"] == "warning"


def test_prune_deletes_only_the_alerts_this_source_declared(live, tmp_path):
    identity = tmp_path / "id.txt"
    encrypt(keygen(identity), VALUE, live.cwd / "runs" / "secrets" / "hf-token.age")
    cfg = ["-c", "astra.yaml", "--age-identity", str(identity)]
    said(live, "apply", *cfg, "--yes")
    said(live, "alert", "create", "by-hand", "--sink", "slack", "--url-secret", "slack-url")
    (live.cwd / "astra.yaml").write_text(astra_yaml(None))  # alerts: []
    kept = said(live, "plan", *cfg)
    assert "Alerts no longer in astra.yaml, kept (add --prune to delete): failures" in kept, kept
    assert "by-hand" not in kept
    pruned = said(live, "plan", *cfg, "--prune")
    assert "- alert failures\n    why: no longer in astra.yaml (--prune)" in pruned, pruned
    assert "by-hand" not in pruned
    said(live, "apply", *cfg, "--prune", "--yes")
    assert [r["name"] for r in live.api("GET", "/alerts").json()["items"]] == ["by-hand"]


def test_a_wrong_identity_fails_plan_and_apply_naming_the_file_and_applies_nothing(live, tmp_path):
    encrypt(keygen(tmp_path / "right.txt"), VALUE, live.cwd / "runs" / "secrets" / "hf-token.age")
    keygen(tmp_path / "wrong.txt")
    cfg = ["-c", "astra.yaml", "--age-identity", str(tmp_path / "wrong.txt")]
    words = "LoadFailed: secret hf-token: secrets/hf-token.age does not decrypt"
    assert words in said(live, "plan", *cfg, code=1)
    assert words in said(live, "apply", *cfg, "--yes", code=1)
    (live.cwd / "runs" / "secrets" / "hf-token.age").write_bytes(b"not age at all")
    right = ["-c", "astra.yaml", "--age-identity", str(tmp_path / "right.txt")]
    assert words in said(live, "apply", *right, "--yes", code=1)
    assert live.api("GET", "/runs").json()["items"] == []
    assert live.api("GET", "/secrets").json()["items"] == []
    assert live.api("GET", "/alerts").json()["items"] == []


def test_a_watch_pass_of_a_bare_git_repository_creates_the_alert_its_source_declares(repo, tmp_path):
    """The source is a local bare repository (``file://``); astra.yaml beside the watch declares
    the alert and the secret, whose age file is committed in the repository."""
    identity = tmp_path / "id.txt"
    repo.run("train")
    (repo.work / "runs" / "secrets").mkdir()
    encrypt(keygen(identity), VALUE, repo.work / "runs" / "secrets" / "hf-token.age")
    repo.commit("a run and its token")
    repo.push()
    cwd = tmp_path / "watcher"
    cwd.mkdir()
    declared = astra_yaml().replace("path: runs", f"repo: {repo.url}\n    ref: main\n    folder: runs")
    (cwd / "astra.yaml").write_text(declared)
    live = LiveServer(tmp_path / "server-home", cwd).start()
    try:
        out = said(live, "watch", "-c", "astra.yaml", "--once", "--age-identity", str(identity))
        assert (
            "team: Ready ReconciliationSucceeded" in out and "; + alert failures; + secret hf-token" in out
        ), out
        [rule] = live.api("GET", "/alerts").json()["items"]
        assert (rule["name"], rule["declared_by"], rule["sink"]) == (
            "failures",
            "team",
            {"kind": "slack", "url": "slack-url"},
        )
        assert live.api("GET", "/runs/train").status_code == 200
        again = said(live, "watch", "-c", "astra.yaml", "--once", "--age-identity", str(identity))
        assert "alert" not in again, again  # applied: nothing to say
    finally:
        live.stop()
