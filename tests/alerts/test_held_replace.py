"""``run.replace_held`` and ``run.replaced``: a watch on a local bare repository, against a live
``astra server`` (a process of its own, its delivery thread and its secret store), holds the
replace of a running run and says so once per (source, run, revision); once the run has ended,
the next pass carries the replace out and that is said once too. The chat is a local stand-in
of a Slack incoming webhook (``conftest.receiver``)."""

from __future__ import annotations

import random

import pytest

from reconciler.clusters.http import HttpCluster
from reconciler.git import Remote
from reconciler.loop import Reconciler, RemoteOrigin, Watch
from reconciler.reconcile import Source
from tests.controlplane_api.conftest import TOKEN, live, until  # noqa: F401 (the live server)
from tests.sources.conftest import ENV, Repo

TRAIN = """\
metadata: {{name: train, labels: {{team: nlp}}}}
spec:
  lifetime: Batch
  task_template:
    image: busybox
    command: sh
    args: [-c, 'while [ ! -e stop ]; do sleep 0.1; done', {word}]
    restart_policy: Never
    requested_resources: {{cpu_cores: 1}}
"""


@pytest.fixture
def repo(tmp_path, monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    (tmp_path / "git").mkdir()
    return Repo(tmp_path / "git")


def test_a_held_replace_is_told_once_per_revision_and_again_once_when_it_is_carried_out(
    live,  # noqa: F811
    repo,
    receiver,
):
    assert live.api("PUT", "/secrets/chat-url", content=receiver.url.encode()).status_code == 201
    sink = {"kind": "slack", "url": "chat-url"}
    body = {"sink": sink, "events": ["run.replace_held", "run.replaced"], "labels": {"team": "nlp"}}
    assert live.api("PUT", "/alerts/lifecycle", json=body).status_code == 201
    repo.write("runs/train.yaml", TRAIN.format(word="v1"))
    repo.commit("train v1")
    repo.push()
    cluster = HttpCluster(live.url, TOKEN)
    clock = [1_000_000.0]
    watch = Watch(
        Reconciler(
            Source("remote", ("runs",), probe=False),
            cluster,
            cluster.source_store(),
            clock=lambda: clock[0],
            who="watch",
            origin=RemoteOrigin(Remote(repo.url, "main", home=repo.root / "home"), "runs"),
            rng=random.Random(1),
        ),
        lambda timeout: set(),
        interval=60.0,
        clock=lambda: clock[0],
    )

    def state() -> str:
        return live.api("GET", "/runs/train").json()["status"]["state"]

    def again() -> dict:
        clock[0] = watch.wake_at()
        return watch.act(set())

    try:
        assert watch.act(set())["state"] == "Ready"
        until(lambda: state() == "Running", what="train to run")
        repo.write("runs/train.yaml", TRAIN.format(word="v2"))
        v2 = repo.commit("train v2: forces a replace")
        repo.push()
        status = again()
        assert (status["state"], [h["run"] for h in status.get("held", [])]) == ("Ready", ["train"])
        assert again().get("held")  # the same revision again (its words say a longer time): not told again
        until(lambda: receiver.got, what="the held replace to be told")
        (folder,) = (live.home / "work").rglob("train")  # the run's working folder
        (folder / "stop").touch()  # the run ends of itself
        until(lambda: state() == "Completed", what="train to complete")
        status = again()
        assert status["state"] == "Ready" and status.get("replaced") == ["train"] and not status.get("held")
        until(lambda: len(receiver.got) >= 2, what="the replace to be told")
        again()
        until(lambda: live.api("GET", "/alerts:history").json()["items"][0]["state"] == "sent", what="sent")
    finally:
        cluster.close()
    texts = [r.json()["text"].split(" <")[0] for r in receiver.got]  # less the link to the source
    assert len(texts) == 2, texts
    assert receiver.got[0].json()["text"].endswith(f"{live.url}/o/default/w/default/sources/remote|open>")
    assert texts[0].startswith(
        f"[warning] source remote: the replace of run train at main@sha1:{v2} is held: train is Running ("
    )
    assert texts[0].endswith("); it will be replaced when it ends")
    assert (
        texts[1] == f"[info] source remote: the held replace of run train was carried out at main@sha1:{v2}"
    )
    assert live.api("GET", "/runs/train").json()["spec"]["task_template"]["args"][-1] == "v2"


def test_a_held_replace_is_told_from_a_ready_status_only_and_carried_out_only_when_it_was_held():
    from reconciler.controlplane.alerts.rules import replace_events

    scope, rev = ("default", "default", "default"), "main@sha1:" + "a" * 40
    held = [{"run": "train", "message": "train is Running (1h, 8 GPUs); it will be replaced when it ends"}]
    carried = {"state": "Reconciling", "reason": "Progressing", "revision": rev, "held": held}
    assert replace_events(scope, "s", {}, carried, 1.0, None) == []  # the last Ready's list, carried
    (told,) = replace_events(scope, "s", carried, {**carried, "state": "Ready"}, 1.0, None)
    assert (told.kind, told.severity, told.run) == ("run.replace_held", "warning", "train")
    assert told.key == f"replace/default/default/s/train/{rev}/held"
    ready = {"state": "Ready", "revision": rev, "replaced": ["train", "other"]}
    (done,) = replace_events(scope, "s", carried, ready, 2.0, None)  # "other" was never held
    assert (done.kind, done.severity, done.key) == (
        "run.replaced",
        "info",
        f"replace/default/default/s/train/{rev}/replaced",
    )
