"""``astra alert create|list|test|history|delete`` as a user runs them, against the control plane
(its API over ASGI: ``remote.call`` forwarded to it), the message sent to a local receiver."""

from __future__ import annotations

import random

from reconciler.cli.app import run
from reconciler.cli.remote import CommandError
from reconciler.controlplane.alerts import Delivery


def test_an_alert_is_made_tested_listed_and_deleted_and_its_history_says_the_answer(
    client, receiver, monkeypatch, capsys
):
    def call(method, path, *, server, token, json=None, start=True):
        got = client.request(method, "/api" + path, json=json)
        if got.status_code >= 400:
            raise CommandError(f"{got.status_code}: {got.text}")
        return got

    monkeypatch.setattr("reconciler.cli.remote.call", call)
    delivery = Delivery(
        client.plane.store,
        lambda ws, n: {"chat-url": receiver.url.encode()}.get(n),
        clock=lambda: 1e6,
        rng=random.Random(1),
    )

    def cli(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = run(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    assert cli(
        "alert", "create", "chat", "--sink", "slack", "--url-secret", "chat-url", "--event", "run.failed"
    ) == (
        0,
        "alert chat saved in workspace default/default: slack\n",
        "",
    )
    code, _, err = cli("alert", "create", "bad", "--sink", "slack", "--url-secret", "https://hooks.example/x")
    assert code == 1 and "422" in err
    code, out, _ = cli("alert", "list")
    assert out.splitlines()[1].split() == ["chat", "slack", "run.failed", "info"]
    assert cli("alert", "test", "chat")[0] == 0
    delivery.step()
    assert receiver.got[0].json() == {"text": "[info] a test of alert chat"}
    code, out, _ = cli("alert", "history", "chat")
    assert code == 0 and "chat  sent  1  a test of alert chat  127.0.0.1: 200 ok" in out
    assert cli("alert", "delete", "chat") == (0, "alert chat deleted\n", "")
    assert cli("alert", "list")[1].splitlines() == ["NAME  SINK  EVENTS  SEVERITY"]
