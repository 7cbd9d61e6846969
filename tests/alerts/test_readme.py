"""The README's "Notifications" examples, run as printed: each ``astra alert create`` line of its
console block (Slack, e-mail, GitHub statuses) against the control plane (over ASGI), with the
secrets it names set in the workspace's secret store; the Slack and e-mail alerts' test messages
reach a local receiver and a real SMTP server (aiosmtpd). GitHub cannot be reached from here:
its alert is held to the rule the line makes (``test_alerts_api`` holds its requests' shape)."""

from __future__ import annotations

import random
import shlex

from reconciler.cli.app import run
from reconciler.cli.remote import CommandError
from reconciler.controlplane.alerts import Delivery
from reconciler.controlplane.alerts.wiring import store_secrets
from tests.controlplane_api.conftest import ROOT


def readme_commands() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    block = text.split("## Notifications\n", 1)[1].split("```console\n", 1)[1].split("```", 1)[0]
    lines = block.replace("\\\n", " ").splitlines()
    return [shlex.split(line[2:], comments=True) for line in lines if line.startswith("$ ")]


def test_the_readme_notifications_examples_work_as_printed(client, receiver, smtp, monkeypatch, capsys):
    def call(method, path, *, server, token, json=None, start=True, **kw):
        got = client.request(method, "/api" + path, json=json)
        if got.status_code >= 400:
            raise CommandError(f"{got.status_code}: {got.text}")
        return got

    monkeypatch.setattr("reconciler.cli.remote.call", call)
    values = {"chat-url": receiver.url, "smtp-url": smtp.url, "gh-token": "ghp_example"}
    commands = readme_commands()
    assert [c[:3] for c in commands if c[1] == "secret"] == [["astra", "secret", "set"]] * 3
    for argv in commands:
        if argv[1] == "secret":  # the value comes from a prompt: set here through the API
            assert client.put(f"/api/secrets/{argv[3]}", content=values[argv[3]].encode()).status_code == 201
        elif argv[:3] == ["astra", "alert", "create"]:
            assert run(argv[1:]) == 0, capsys.readouterr()
    rules = {r["name"]: r for r in client.get("/api/alerts").json()["items"]}
    assert rules["chat"]["sink"] == {"kind": "slack", "url": "chat-url"}
    assert (rules["chat"]["events"], rules["chat"]["labels"]) == (["run.failed"], {"team": "nlp"})
    assert rules["oncall"]["sink"]["to"] == ["ops@example.com"] and rules["oncall"]["severity"] == "error"
    assert rules["commits"]["sink"] == {"kind": "github", "repo": "acme/runs", "token": "gh-token"}
    delivery = Delivery(
        client.plane.store, store_secrets(client.plane.store), clock=lambda: 1e6, rng=random.Random(1)
    )
    for name in ("chat", "oncall"):
        assert run(["alert", "test", name]) == 0
    delivery.step()
    assert [r.json()["text"] for r in receiver.got] == ["[info] a test of alert chat"]
    (mail,) = smtp.messages
    assert mail.rcpt_tos == ["ops@example.com"] and b"a test of alert oncall" in mail.content
