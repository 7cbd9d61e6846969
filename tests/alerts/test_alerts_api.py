"""``/alerts`` and the commit status of a watch, end to end: a watch on a local bare repository
writes its source's status to the control plane (over ASGI); the alerts queue what it means;
the delivery sends it to a local stand-in of GitHub's statuses API (which checks the documented
request: ``POST /repos/{owner}/{repo}/statuses/{sha}``, a Bearer token, ``state``, ``context``,
``description``, ``target_url``; it answers 201 as GitHub does) and a signed-webhook receiver.

The secrets here come from a dict-backed lookup (the server reads the workspace's secret store
through ``wiring.store_secrets``: ``test_kill`` and ``test_readme`` use it)."""

from __future__ import annotations

import hashlib
import hmac
import random

import pytest

from reconciler.controlplane.alerts import Delivery
from reconciler.git import Remote
from reconciler.loop import Reconciler, RemoteOrigin, Watch
from reconciler.reconcile import Source
from tests.sources.conftest import ENV, Repo

SECRETS = {"gh-token": b"ghp_example", "hook-url": b"", "hook-key": b"signing-key"}


@pytest.fixture
def repo(tmp_path, monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    (tmp_path / "git").mkdir()
    return Repo(tmp_path / "git")


def test_an_alert_with_a_plain_url_in_its_sink_is_refused_and_one_with_a_secret_name_is_kept(client):
    plain = client.put(
        "/api/alerts/chat", json={"sink": {"kind": "slack", "url": "https://hooks.slack.com/x"}}
    )
    assert plain.status_code == 422
    assert plain.json() == [
        {
            "path": "sink.url",
            "message": "must be the name of a secret of the workspace (astra secret set NAME), "
            "never the URL or token itself",
        }
    ]
    assert "hooks.slack.com" not in plain.text  # the value pasted in is not said back
    made = client.put(
        "/api/alerts/chat", json={"sink": {"kind": "slack", "url": "slack-url"}, "severity": "error"}
    )
    assert made.status_code == 201 and made.json()["sink"] == {"kind": "slack", "url": "slack-url"}
    assert (
        client.put("/api/alerts/chat", json={"sink": {"kind": "slack", "url": "slack-url"}}).status_code
        == 200
    )
    unknown = client.put(
        "/api/alerts/x", json={"sink": {"kind": "slack", "url": "s"}, "events": ["run.exploded"]}
    )
    assert unknown.status_code == 422 and unknown.json()[0]["path"] == "events[0]"
    assert [a["name"] for a in client.get("/api/alerts").json()["items"]] == ["chat"]
    assert client.delete("/api/alerts/chat").status_code == 204
    assert client.delete("/api/alerts/chat").status_code == 404


def test_a_commit_that_fails_validation_gets_failure_then_success_and_the_webhook_one_signed_event(
    client,
    wire,
    repo,
    receiver,
):
    cluster, _ = wire
    statuses, hooks = [], []

    def answer(r):
        if r.path.startswith("/repos/"):
            ok = r.headers.get("authorization") == "Bearer ghp_example" and r.path.startswith(
                "/repos/acme/runs/statuses/"
            )
            statuses.append((r.path.rsplit("/", 1)[1], r.json()))
            return (201, {}, b"{}") if ok else (401, {}, b"{}")
        hooks.append(r)
        return 200, {}, b""

    receiver.answer = answer
    secrets = {**SECRETS, "hook-url": f"{receiver.url}/hook".encode()}
    clock = [1_000_000.0]
    delivery = Delivery(
        client.plane.store, lambda ws, n: secrets.get(n), clock=lambda: clock[0], rng=random.Random(1)
    )
    client.app.state.alerts = delivery
    github = {"kind": "github", "repo": "acme/runs", "token": "gh-token", "api": receiver.url}
    assert client.put("/api/alerts/commits", json={"sink": github}).status_code == 201
    hook = {"kind": "webhook", "url": "hook-url", "key": "hook-key"}
    assert client.put("/api/alerts/ci", json={"sink": hook, "severity": "error"}).status_code == 201

    repo.write("runs/a.yaml", "metadata: {name: a}\nspec:\n  array: {size: 0}\n  task_template: {image: x}\n")
    bad = repo.commit("a broken run")
    repo.push()
    reconciler = Reconciler(
        Source("remote", ("runs",), probe=False),
        cluster,
        cluster.source_store(),
        clock=lambda: clock[0],
        who="watch",
        origin=RemoteOrigin(Remote(repo.url, "main", home=repo.root / "home"), "runs"),
        rng=random.Random(1),
    )
    watch = Watch(reconciler, lambda timeout: set(), interval=60.0, clock=lambda: clock[0])
    stalled = watch.act(set())
    assert stalled["state"] == "Stalled"
    delivery.step()
    assert [(sha, s["state"]) for sha, s in statuses] == [(bad, "pending"), (bad, "failure")]
    failure = statuses[-1][1]
    assert failure["context"] == "astra/default/remote"
    first = stalled["message"].split("; ")[0]  # "1 problem: runs/a.yaml:3:…: the first error"
    assert "spec.array.size" in first
    assert failure["description"] == (first if len(first) <= 140 else first[:139] + "…")
    assert failure["target_url"] == "http://astra.test/o/default/w/default/sources/remote"
    page = client.get("/o/default/w/default/sources/remote")  # the link opens the source's page
    assert page.status_code == 200 and "spec.array.size" in page.text
    (signed,) = hooks  # the webhook takes errors only: the one failure
    stamp = signed.headers["x-astra-timestamp"]
    wanted = hmac.new(b"signing-key", stamp.encode() + b"." + signed.body, hashlib.sha256).hexdigest()
    assert signed.headers["x-astra-signature"] == f"sha256={wanted}"
    assert signed.json()["kind"] == "source.stalled" and signed.json()["revision"] == f"main@sha1:{bad}"

    repo.write("runs/a.yaml", "metadata: {name: a}\nspec:\n  task_template: {image: x}\n")
    good = repo.commit("fixed")
    repo.push()
    clock[0] = watch.wake_at()
    assert watch.act(set())["state"] == "Ready"
    delivery.step()
    assert [(sha, s["state"]) for sha, s in statuses[2:]] == [(good, "pending"), (good, "success")]
    assert statuses[-1][1]["description"].startswith("applied: 1 created")
    assert len(hooks) == 1  # Ready is info: not the webhook's
    history = client.get("/api/alerts:history", params={"alert": "commits"}).json()["items"]
    assert [m["state"] for m in history] == ["sent"] * 4 and "201" in history[0]["answer"]
    assert b"ghp_example" not in client.get("/api/alerts:history").content


def test_the_console_alerts_page_says_what_was_sent_and_the_answer(client, receiver):
    secrets = {"chat-url": receiver.url.encode()}
    delivery = Delivery(
        client.plane.store, lambda ws, n: secrets.get(n), clock=lambda: 1e6, rng=random.Random(1)
    )
    assert (
        client.put("/api/alerts/chat", json={"sink": {"kind": "slack", "url": "chat-url"}}).status_code == 201
    )
    assert client.post("/api/alerts/chat/test").status_code == 202
    delivery.step()
    page = client.get("/o/default/w/default/alerts")  # the console takes the bearer token too
    assert page.status_code == 200
    assert 'data-alert="chat"' in page.text and "a test of alert chat" in page.text and "200 ok" in page.text
    assert receiver.url not in page.text  # the sink's URL is a secret: only its name is known


def test_the_kinds_an_alert_may_select_are_the_kinds_there_are():
    from typing import get_args

    from reconciler.controlplane.alerts.rules import KINDS
    from reconciler.runspec.alertdecl import ALERT_KINDS
    from reconciler.wire.alerts import EventKind

    assert set(get_args(EventKind)) == set(KINDS)
    assert set(ALERT_KINDS) == set(KINDS)  # astra.yaml's alerts (its published schema) too


def test_a_sink_that_hangs_leaves_the_watch_pass_as_quick_as_with_no_alert_and_gives_up_after_its_limit(
    client, wire, tmp_path, monkeypatch, receiver
):
    """The server's delivery thread (``DeliveryTask``) runs beside the passes, held in sends to a
    sink that takes the connection and never answers; the passes only queue their events. Their
    time is measured as a ratio to passes with no alert (the best of five each, so that a busy
    machine's noise is not the figure), never as an absolute time (measured on a loaded 2-core
    machine: 0.6 to 1.7, as passes with an alert and no delivery thread; a pass that waited on the
    sink would be 40 times slower, its send's timeout). Then, on the simulated clock
    (each retry's backoff waited there, each send ending at its timeout), the message gives up
    after ``MAX_ATTEMPTS`` and the ``alert.gave_up`` event reaches the alert that selects it."""
    import socket
    import threading
    import time

    from reconciler.controlplane.alerts import sinks
    from reconciler.controlplane.alerts.delivery import MAX_ATTEMPTS, DeliveryTask

    cluster, _ = wire
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    run = tmp_path / "runs" / "a.yaml"
    clock = [1_000_000.0]
    reconciler = Reconciler(
        Source("folder", ("runs",), probe=False),
        cluster,
        cluster.source_store(),
        clock=lambda: clock[0],
        who="w",
    )

    def best_pass() -> float:
        took = []
        for i in range(5):
            run.write_text(f"metadata: {{name: a}}\nspec:\n  task_template: {{image: x, args: ['{i}']}}\n")
            clock[0] += 1.0
            start = time.perf_counter()
            assert reconciler.reconcile_once()["state"] == "Ready"
            took.append(time.perf_counter() - start)
        return min(took)

    quiet = best_pass()
    with socket.socket() as hanging:
        hanging.bind(("127.0.0.1", 0))
        hanging.listen(16)  # never answers
        hung = f"http://127.0.0.1:{hanging.getsockname()[1]}".encode()
        urls = {"chat-url": hung, "oncall-url": receiver.url.encode()}
        timeout, sending = [2.0], threading.Event()

        def send(out):
            sending.set()
            held = out.url.startswith(hung.decode())  # the oncall receiver is given the usual timeout
            return sinks.send(out, timeout=timeout[0] if held else sinks.TIMEOUT)

        delivery = Delivery(
            client.plane.store, lambda ws, n: urls[n], clock=lambda: clock[0], rng=random.Random(1), send=send
        )
        client.app.state.alerts = delivery
        chat = {"sink": {"kind": "slack", "url": "chat-url"}, "events": ["source.ready"]}
        assert client.put("/api/alerts/chat", json=chat).status_code == 201
        oncall = {"sink": {"kind": "slack", "url": "oncall-url"}, "events": ["alert.gave_up"]}
        assert client.put("/api/alerts/oncall", json=oncall).status_code == 201
        task = DeliveryTask(delivery, every=0.05)
        client.app.state.alerts_wake = task.wake
        task.start()
        try:
            clock[0] += 1.0
            run.write_text("metadata: {name: a}\nspec:\n  task_template: {image: x, args: [first]}\n")
            assert reconciler.reconcile_once()["state"] == "Ready"
            assert sending.wait(10)  # the delivery thread is held in a send to the hanging sink
            told = best_pass()
        finally:
            task.stop()
        history = client.get("/api/alerts:history", params={"alert": "chat"}).json()["items"]
        assert len(history) == 6 and all(m["state"] == "queued" for m in history)  # each pass's Ready
        assert told / quiet < 2.0, (told, quiet)

        timeout[0] = 0.05  # the rest on the simulated clock: each try to it ends at a short timeout
        for _ in range(10 * MAX_ATTEMPTS):
            due = delivery.step()
            if due is None:
                break
            clock[0] = max(clock[0], due)
    for gave_up in client.get("/api/alerts:history", params={"alert": "chat"}).json()["items"]:
        assert (gave_up["state"], gave_up["attempts"]) == ("gave_up", MAX_ATTEMPTS)
        assert "Timeout" in gave_up["answer"]
    told_oncall = [r.json()["text"] for r in receiver.got]  # one alert.gave_up per message given up
    assert len(told_oncall) == 6
    assert all(t.startswith("[error] alert chat gave up on source.ready") for t in told_oncall)
    assert hung not in b"".join(r.body for r in receiver.got)  # the sink's URL is a secret


def test_a_suspend_and_a_resume_are_told_to_the_alerts_that_select_them(client, receiver):
    delivery = Delivery(
        client.plane.store, lambda ws, n: receiver.url.encode(), clock=lambda: 1e6, rng=random.Random(1)
    )
    client.app.state.alerts = delivery
    sink = {"kind": "slack", "url": "chat-url"}
    body = {"sink": sink, "events": ["source.suspended", "source.resumed"]}
    assert client.put("/api/alerts/ops", json=body).status_code == 201
    client.put("/api/sources/team/suspend", json={"by": "ada", "reason": "broken config"})
    client.delete("/api/sources/team/suspend")
    delivery.step()
    assert [r.json()["text"] for r in receiver.got] == [
        "[warning] source team suspended by ada: broken config; no pass runs until resumed",
        "[info] source team resumed: its next pass is a full one",
    ]
