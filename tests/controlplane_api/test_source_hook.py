"""A source's webhook: GitHub's and GitLab's signatures accepted, anything else 401; a signed
call starts the watch's next pass at once (``HookEvents`` polls the count with a simulated clock)."""

from __future__ import annotations

import hashlib
import hmac
import json
import random

from reconciler.clusters.fake import FakeCluster
from reconciler.loop import TRIGGER, HookEvents

from .test_sources import wire  # noqa: F401 (a fixture)

SECRET = "a-secret-of-some-length"
BODY = json.dumps({"ref": "refs/heads/main", "after": "3f8a819"}).encode()


def signed(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def test_a_webhook_takes_github_and_gitlab_signatures_and_refuses_the_rest(client):
    hook = "/api/sources/team/hook"
    assert client.post(hook, content=BODY, token=None).status_code == 401  # no secret set yet
    assert client.put(hook, json={"secret": SECRET}).status_code == 204
    assert client.put(hook, json={"secret": "short"}).status_code == 422
    assert (
        client.put(hook, json={"secret": SECRET}, token=None).status_code == 401
    )  # setting it needs the token
    good = client.post(hook, content=BODY, token=None, headers={"X-Hub-Signature-256": signed(BODY)})
    assert good.status_code == 202 and good.json() == {"name": "team", "count": 1, "secret_set": True}
    for headers in (
        {"X-Hub-Signature-256": signed(BODY, "another-secret-entirely")},
        {"X-Hub-Signature-256": signed(BODY + b" ")},
        {"X-Gitlab-Token": "wrong"},
        {},
    ):
        refused = client.post(hook, content=BODY, token=None, headers=headers)
        assert refused.status_code == 401, headers
    assert client.post(hook, content=BODY, token=None, headers={"X-Gitlab-Token": SECRET}).status_code == 202
    long_form = "/api/v1/orgs/default/workspaces/default/clusters/default/api/sources/team/hook"
    assert (
        client.post(long_form, content=BODY, token=None, headers={"X-Gitlab-Token": SECRET}).status_code
        == 202
    )
    state = client.get(hook).json()
    assert state == {"name": "team", "count": 3, "secret_set": True} and SECRET not in json.dumps(state)
    assert SECRET not in client.get("/api/sources").text


def test_a_signed_call_starts_the_next_pass_of_a_watch_at_once(client, wire):  # noqa: F811
    from reconciler.loop import Reconciler, Watch
    from reconciler.reconcile import Source

    cluster, _ = wire
    store = cluster.source_store()
    store.set_hook_secret("team", SECRET)
    clock = [1000.0]
    slept = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    events = HookEvents(["team"], store.hook_count, poll=2.0, sleep=sleep, clock=lambda: clock[0])
    assert events(10.0) == {} and sum(slept) == 10.0  # nothing: polled every 2 s until the timeout
    assert (
        client.post(
            "/api/sources/team/hook", content=BODY, token=None, headers={"X-Hub-Signature-256": signed(BODY)}
        ).status_code
        == 202
    )
    slept.clear()
    assert events(300.0) == {"team": {TRIGGER}} and slept == []  # seen at the first look

    fake = FakeCluster(now=lambda: clock[0])
    passes = []
    reconciler = Reconciler(
        Source("team", ("runs",), probe=False),
        fake,
        fake.source_store(),
        clock=lambda: clock[0],
        who="w",
        rng=random.Random(1),
    )
    reconciler.reconcile_once = lambda changed=None, names=(): passes.append(changed) or {"state": "Ready"}
    watch = Watch(reconciler, events.single("team"), interval=3600.0, clock=lambda: clock[0])
    watch.next_resync = clock[0] + 3600.0  # the first resync is an hour away
    client.post("/api/sources/team/hook", content=BODY, token=None, headers={"X-Gitlab-Token": SECRET})
    assert watch.step() and passes == [None]  # a full pass, long before the resync
