"""Git as the source of truth, with real repositories: revisions are commits, a remote is fetched
and exactly its commit applied, pushes and force-pushes are followed, a broken remote leaves the
runs alone, a dirty tree is refused in CI, rollbacks and diffs by commit."""

from __future__ import annotations

import random
import shutil

import pytest

from reconciler.apply import DirtyTree, apply_source
from reconciler.clusters.fake import FakeCluster
from reconciler.git import Remote, SourceFetchFailed, checkout_commit
from reconciler.loop import BACKOFF_BASE, Reconciler, RemoteOrigin, Watch
from reconciler.reconcile import Source, plan_source

NOW = 1_700_000_000.0


class Clock:
    def __init__(self, t: float = NOW):
        self.t = t

    def __call__(self) -> float:
        return self.t


def annotations(cluster: FakeCluster, name: str) -> dict:
    return cluster.get_run(name).document["metadata"].get("annotations", {})


def test_a_folder_in_git_plans_at_its_commit_and_stamps_every_run_it_creates(repo, monkeypatch):
    repo.run("a")
    repo.run("b")
    sha = repo.commit("two runs")
    monkeypatch.chdir(repo.work)
    cluster = FakeCluster(now=lambda: NOW)
    store = cluster.source_store()
    done = apply_source(Source("team", ("runs",)), cluster, store, now=lambda: NOW, who="me")
    assert done.plan.revision["id"] == f"main@sha1:{sha}" and not done.plan.revision["dirty"]
    assert done.plan.revision["subject"] == "two runs"
    assert annotations(cluster, "a") == {
        "astra.file": "runs/a.yaml",
        "astra.revision": f"main@sha1:{sha}",
        "astra.source": "team",
    }
    [entry] = store.read("team").history
    assert entry.commit == sha and entry.revision["id"] == f"main@sha1:{sha}"
    assert entry.changes == {"created": ["a", "b"]}
    # a new commit that leaves a run as it was changes nothing of it, not even its stamp
    repo.run("b", image="python:3.13")
    second = repo.commit("b on 3.13")
    again = apply_source(Source("team", ("runs",)), cluster, store, now=lambda: NOW, who="me")
    assert {c.address: c.action.value for c in again.plan.changes} == {"a": "noop", "b": "replace"}
    assert annotations(cluster, "a")["astra.revision"] == f"main@sha1:{sha}"
    assert annotations(cluster, "b")["astra.revision"] == f"main@sha1:{second}"


def test_a_dirty_tree_is_said_in_the_plan_and_refused_in_ci_without_allow_dirty(repo, monkeypatch):
    repo.run("a")
    sha = repo.commit("a")
    repo.run("a", image="python:3.13")  # not committed
    monkeypatch.chdir(repo.work)
    cluster = FakeCluster(now=lambda: NOW)
    plan = plan_source(Source("team", ("runs",)), cluster, cluster.source_store(), NOW)
    assert plan.revision["id"] == f"main@sha1:{sha}+dirty"
    from reconciler.plan import plan_to_json
    from reconciler.plan.render_markdown import revision_lines

    assert "dirty" in revision_lines(plan_to_json(plan))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(DirtyTree, match="give --allow-dirty"):
        apply_source(Source("team", ("runs",)), cluster, cluster.source_store(), now=lambda: NOW, who="ci")
    assert cluster.names() == []
    done = apply_source(
        Source("team", ("runs",)),
        cluster,
        cluster.source_store(),
        now=lambda: NOW,
        who="ci",
        allow_dirty=True,
    )
    assert done.ok and annotations(cluster, "a")["astra.revision"].endswith("+dirty")


def remote_reconciler(repo, cluster, clock, *, folder="runs", prune=True, url=None):
    remote = Remote(url or repo.url, "main", home=repo.root / "home")
    source = Source("remote", (folder,), prune=prune, probe=False)
    return Reconciler(
        source,
        cluster,
        cluster.source_store(),
        clock=clock,
        who="watch",
        origin=RemoteOrigin(remote, folder),
        rng=random.Random(1),
    )


def test_a_watch_follows_a_remote_branch_commit_by_commit_and_a_force_push(repo):
    repo.run("a")
    repo.run("b")
    first = repo.commit("first")
    repo.push()
    cluster = FakeCluster(now=lambda: NOW)
    clock = Clock()
    r = remote_reconciler(repo, cluster, clock)
    watch = Watch(r, lambda timeout: set(), interval=60.0, clock=clock, rng=random.Random(2))
    assert watch.act(set())["state"] == "Ready"
    assert annotations(cluster, "a")["astra.revision"] == f"main@sha1:{first}"
    assert annotations(cluster, "a")["astra.file"] == "runs/a.yaml"
    assert cluster.source_store().read("remote").status["revision"] == f"main@sha1:{first}"
    # the snapshot is the commit's tree, read only: never a working copy
    tree = r.checkout.paths[0]
    assert oct(__import__("os").stat(f"{tree}/a.yaml").st_mode & 0o777) == "0o444"

    repo.run("a", image="python:3.13")
    (repo.work / "runs" / "b.yaml").unlink()
    second = repo.commit("a on 3.13, b gone")
    repo.push()
    assert watch.act(set()) is None  # not due yet: nothing fetched
    clock.t = watch.wake_at()  # within the interval (±10%)
    assert clock.t - NOW <= 66
    assert watch.act(set())["state"] == "Ready"
    assert cluster.names() == ["a"]
    assert annotations(cluster, "a")["astra.revision"] == f"main@sha1:{second}"

    repo.git("reset", "-q", "--hard", first)
    repo.run("c")
    rewritten = repo.commit("history rewritten")
    repo.push(force=True)
    clock.t = watch.wake_at()
    assert watch.act(set())["state"] == "Ready"
    assert cluster.names() == ["a", "b", "c"]
    history = cluster.source_store().read("remote").history
    assert [h.revision["commit"] for h in history] == [first, second, rewritten]
    assert "force-push" in history[-1].note and first[:7] not in history[-1].note


def test_a_broken_remote_leaves_the_runs_alone_and_is_retried_with_backoff(repo):
    repo.run("a")
    repo.commit("a")
    repo.push()
    cluster = FakeCluster(now=lambda: NOW)
    clock = Clock()
    r = remote_reconciler(repo, cluster, clock)
    assert r.reconcile_once()["state"] == "Ready"
    moved = repo.root / "gone.git"
    shutil.move(repo.bare, moved)
    cluster.calls.clear()
    status = r.reconcile_once()
    assert (status["state"], status["reason"], status["step"]) == (
        "Reconciling",
        "SourceFetchFailed",
        "fetch",
    )
    assert "cannot fetch" in status["message"]
    assert cluster.names() == ["a"] and cluster.calls == []  # nothing planned, nothing pruned
    assert BACKOFF_BASE * 0.9 <= r.retry_at - clock.t <= BACKOFF_BASE * 1.1
    r.reconcile_once()
    assert BACKOFF_BASE * 2 * 0.9 <= r.retry_at - clock.t <= BACKOFF_BASE * 2 * 1.1  # backs off
    shutil.move(moved, repo.bare)
    assert r.reconcile_once()["state"] == "Ready" and r.retry_at is None


def test_a_commit_holding_a_file_too_deep_is_refused_in_words_and_leaves_the_runs_alone(repo, deep_folders):
    """Git has no limit on how deep a path nests; writing such a tree recursed once a folder
    (``RecursionError``). The commit is refused before anything is written."""
    repo.run("a")
    repo.commit("a")
    repo.push()
    cluster = FakeCluster(now=lambda: NOW)
    r = remote_reconciler(repo, cluster, Clock())
    assert r.reconcile_once()["state"] == "Ready"
    deep_folders(repo.work, "d", 1_500, "run.yaml", "metadata: {name: deep}\n")
    repo.commit("deep")
    repo.push()
    cluster.calls.clear()
    status = r.reconcile_once()
    assert (status["state"], status["reason"], status["step"]) == ("Stalled", "LoadFailed", "load")
    assert status["message"] == (
        "d/…/run.yaml: the commit holds a file 1500 folders deep; astra reads at most 255: move it up"
    )
    assert cluster.names() == ["a"] and cluster.calls == []  # nothing planned, nothing pruned


def test_a_remote_over_http_is_fetched_like_one_on_disk(repo, served):
    repo.run("a")
    sha = repo.commit("a")
    repo.push()
    fetched = Remote(served, "main", home=repo.root / "home").fetch()
    assert fetched.revision.commit == sha and fetched.revision.id == f"main@sha1:{sha}"
    assert fetched.revision.author == "Ada Lovelace <ada@example.com>"
    cluster = FakeCluster(now=lambda: NOW)
    r = remote_reconciler(repo, cluster, Clock(), url=served)
    assert r.reconcile_once()["state"] == "Ready" and cluster.names() == ["a"]


def test_a_fetch_of_a_ref_the_remote_has_not_says_so_without_credentials(repo):
    repo.run("a")
    repo.commit("a")
    repo.push()
    secret_url = "https://user:s3cret@127.0.0.1:9/nowhere.git"
    with pytest.raises(SourceFetchFailed) as failed:
        Remote(secret_url, "main", home=repo.root / "home").fetch()
    assert "s3cret" not in str(failed.value) and "https://127.0.0.1:9/nowhere.git" in str(failed.value)
    with pytest.raises(SourceFetchFailed, match="no-such-branch"):
        Remote(repo.url, "no-such-branch", home=repo.root / "home").fetch()


def test_a_rollback_applies_an_older_commit_and_says_so(repo, monkeypatch):
    repo.run("a")
    old = repo.commit("a on 3.12")
    repo.run("a", image="python:3.13")
    repo.commit("a on 3.13")
    monkeypatch.chdir(repo.work)
    cluster = FakeCluster(now=lambda: NOW)
    store = cluster.source_store()
    apply_source(Source("team", ("runs",)), cluster, store, now=lambda: NOW, who="me")
    checkout = checkout_commit(["runs"], old[:8], repo.root / "home")
    done = apply_source(
        Source("team", ("runs",), checkout=checkout), cluster, store, now=lambda: NOW, who="me"
    )
    assert done.plan.revision["rollback"] and done.plan.revision["commit"] == old
    assert [c.file for c in done.plan.changes] == ["runs/a.yaml"]  # named as in the repository
    assert cluster.get_run("a").document["spec"]["task_template"]["image"] == "python:3.12"
    assert store.read("team").history[-1].note == f"rollback to main@sha1:{old}"
    assert (repo.work / "runs" / "a.yaml").read_text().count("3.13") == 1  # the working tree untouched


def test_diff_of_two_commits_is_in_runs(repo, monkeypatch):
    from reconciler.cli.history import diff_revisions
    from reconciler.cli.planning import Git

    repo.run("a")
    repo.run("b")
    repo.run("c")
    before = repo.commit("three")
    repo.run("a", image="python:3.13")  # replaced (the image forces it)
    repo.write(
        "runs/b.yaml",
        "metadata: {name: b, labels: {team: x}}\n"
        + (repo.work / "runs/b.yaml").read_text().split("\n", 2)[2],
    )
    (repo.work / "runs" / "c.yaml").unlink()
    repo.run("d")
    after = repo.commit("changes")
    monkeypatch.chdir(repo.work)
    plan = diff_revisions(["runs"], Git(), before, after)
    assert {c.address: c.action.value for c in plan.changes} == {
        "a": "replace",
        "b": "update",
        "c": "delete",
        "d": "create",
    }
