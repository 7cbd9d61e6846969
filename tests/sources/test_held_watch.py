"""The issue's watch test: a push that changes one word of a Running run's args is held (the run
is not stopped; the source's status names it), carried out once the run ends, and done at once
with ``--replace``."""

from __future__ import annotations

import random

from reconciler.apply import apply_source
from reconciler.clusters.fake import FakeCluster
from reconciler.loop import Watch
from reconciler.reconcile import Source

from .test_git_sources import NOW, Clock, remote_reconciler

GF = """\
metadata:
  name: gf-train
spec:
  task_template:
    image: python:3.12
    command: python
    args: [train.py, {word}]
    requested_resources:
      gpu_requests:
        count: 16
"""

HELD = "gf-train is Running (3h12m, 16 GPUs); it will be replaced when it ends"


def _args(cluster: FakeCluster) -> list[str]:
    return cluster.get_run("gf-train").document["spec"]["task_template"]["args"]


def test_a_push_holds_the_replace_of_a_running_run_until_it_ends(repo):
    repo.write("runs/gf-train.yaml", GF.format(word="--lr=1e-4"))
    repo.commit("gf-train")
    repo.push()
    cluster = FakeCluster(now=lambda: NOW)
    clock = Clock()
    watch = Watch(
        remote_reconciler(repo, cluster, clock),
        lambda timeout: set(),
        interval=3.0,
        clock=clock,
        rng=random.Random(2),
    )
    assert watch.act(set())["state"] == "Ready"
    repo.write("runs/gf-train.yaml", GF.format(word="--lr=3e-4"))  # one word of its args
    repo.commit("a typo")
    repo.push()
    clock.t = watch.wake_at()
    cluster.start("gf-train", workers=2, gpus=8, started_at=clock.t - (3 * 3600 + 12 * 60))
    version = cluster.get_run("gf-train").resource_version
    status = watch.act(set())
    assert status["state"] == "Ready"
    assert status["held"] == [{"run": "gf-train", "message": HELD}]
    assert "1 replace held until the run ends (gf-train)" in status["message"]
    assert ("delete", "gf-train") not in cluster.calls
    assert cluster.get_run("gf-train").resource_version == version and _args(cluster)[1] == "--lr=1e-4"
    assert cluster.source_store().read("remote").status["held"] == status["held"]

    for _ in range(3):  # passes while it runs: still held, nothing stopped
        clock.t = watch.wake_at()
        watch.act(set())
    assert ("delete", "gf-train") not in cluster.calls

    cluster.finish("gf-train", "Completed", at=clock.t)
    clock.t = watch.wake_at()
    status = watch.act(set())
    assert "held" not in status and "1 replaced (gf-train)" in status["message"]
    assert _args(cluster)[1] == "--lr=3e-4" and cluster.get_run("gf-train").state == "Pending"

    cluster.finish("gf-train", "Completed", at=clock.t)
    calls = len(cluster.calls)
    for _ in range(3):  # a finished run is never re-created by the loop while its spec is unchanged
        clock.t = watch.wake_at()
        watch.act(set())
    assert not [c for c in cluster.calls[calls:] if c[0] in ("create", "delete")]
    assert cluster.get_run("gf-train").state == "Completed"


def test_apply_with_replace_does_it_at_once(repo, monkeypatch):
    repo.write("runs/gf-train.yaml", GF.format(word="--lr=1e-4"))
    repo.commit("gf-train")
    monkeypatch.chdir(repo.work)
    cluster = FakeCluster(now=lambda: NOW)
    store = cluster.source_store()
    assert apply_source(Source("team", ("runs",)), cluster, store, now=lambda: NOW, who="me").ok
    cluster.start("gf-train", workers=2, gpus=8, started_at=NOW - 600)
    repo.write("runs/gf-train.yaml", GF.format(word="--lr=3e-4"))
    repo.commit("a typo")
    held = apply_source(Source("team", ("runs",)), cluster, store, now=lambda: NOW, who="me")
    assert [c.address for c in held.plan.held] == ["gf-train"] and _args(cluster)[1] == "--lr=1e-4"
    assert store.read("team").status["held"][0]["run"] == "gf-train"
    done = apply_source(
        Source("team", ("runs",), replace=("gf-train",)), cluster, store, now=lambda: NOW, who="me"
    )
    assert [e.outcome for e in done.result.entries] == ["replaced"] and _args(cluster)[1] == "--lr=3e-4"
    assert "held" not in store.read("team").status
