"""``python -m bench --only git``: git sources at 10,000 specs.

* a cold clone (``Remote.fetch`` into an empty cache, then the snapshot of the whole tree);
* a warm fetch of a commit that changes one file (``fetch``, then the snapshot updated: one file);
* a warm pass on a new commit (the watch's ``reconcile_once``: fetch, snapshot, load, plan, apply
  the one changed run) against the warm plan of the same files on disk (``plan_source`` of the
  work tree, the load cache warm): target at most 2x;
* for the choice of library, the same cold clone and warm fetch by dulwich and pygit2 when they
  are installed (they are not astra's dependencies: ``pip install dulwich pygit2`` to compare).

Each figure is the median of ``rounds``; the cluster is the in-memory fake (what is measured is
the source, not the API).
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from .specs import write_specs

__all__ = ["main"]

ENV = {
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@b",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@b",
}


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **ENV}, check=True, capture_output=True)


def _change_one(work: Path, i: int) -> None:
    files = sorted((work / "runs").rglob("*.yaml"))
    target = files[(i * 7919) % len(files)]
    target.write_text(target.read_text() + f"# change {i}\n")
    _git("commit", "-qam", f"change {i}", cwd=work)
    _git("push", "-q", "origin", "main", cwd=work)


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(n: int = 10_000, rounds: int = 3) -> dict[str, Any]:
    from reconciler.clusters.fake import FakeCluster
    from reconciler.git import Remote
    from reconciler.load import FileCache
    from reconciler.loop import Reconciler, RemoteOrigin
    from reconciler.reconcile import Source, plan_source

    root = Path(tempfile.mkdtemp(prefix="astra-bench-git-"))
    try:
        work, bare = root / "work", root / "remote.git"
        work.mkdir()
        write_specs(work / "runs", n, modeline="# yaml-language-server: $schema=schema/run.schema.json")
        _git("init", "-q", "-b", "main", cwd=work)
        _git("config", "gc.auto", "0", cwd=work)
        _git("add", "-A", cwd=work)
        _git("commit", "-qm", "specs", cwd=work)
        _git("clone", "-q", "--bare", str(work), str(bare), cwd=root)
        _git("remote", "add", "origin", str(bare), cwd=work)
        url = f"file://{bare}"
        out: dict[str, Any] = {"specs": n}

        cold, checkout = [], []
        for i in range(rounds):
            home = root / f"cold{i}"
            remote = Remote(url, "main", home=home)
            cold.append(_timed(remote.fetch))
            fetched = remote.fetch()
            checkout.append(_timed(lambda r=remote, f=fetched: r.checkout(f.revision, "runs")))
        out["cold clone (fetch) s"] = statistics.median(cold)
        out["cold snapshot of the tree s"] = statistics.median(checkout)

        remote = Remote(url, "main", home=root / "cold0")
        warm = []
        for i in range(rounds):
            _change_one(work, i)
            warm.append(_timed(lambda: remote.checkout(remote.fetch().revision, "runs")))
        out["warm fetch + snapshot, one file changed s"] = statistics.median(warm)

        # the warm pass on a new commit against the warm plan of the same files on disk
        cluster = FakeCluster(now=time.time)
        cache = FileCache(root / "cache")
        r = Reconciler(
            Source("bench", ("runs",), probe=False),
            cluster,
            cluster.source_store(),
            clock=time.time,
            who="bench",
            cache=cache,
            origin=RemoteOrigin(Remote(url, "main", home=root / "watch"), "runs"),
            rng=random.Random(1),
        )
        assert r.reconcile_once()["state"] == "Ready"
        passes = []
        for i in range(rounds):
            _change_one(work, rounds + i)
            passes.append(_timed(lambda: r.reconcile_once()))
            assert r.last_result is not None and r.last_result.ok
        # the same files on disk, as their own source (its own inventory, applied once: warm)
        from reconciler.apply import apply_source

        disk = Source("disk", (str(work / "runs"),), probe=False)
        apply_source(disk, cluster, cluster.source_store(), cache=cache, who="bench")
        plans = [
            _timed(lambda: plan_source(disk, cluster, cluster.source_store(), time.time(), cache=cache))
            for _ in range(rounds)
        ]
        out["warm pass on a new commit s"] = statistics.median(passes)
        out["warm plan of the same files on disk s"] = statistics.median(plans)
        ratio = out["warm pass on a new commit s"] / out["warm plan of the same files on disk s"]
        out["pass / plan (target <= 2x)"] = ratio
        out.update(_libraries(root, url, work, rounds))
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _libraries(root: Path, url: str, work: Path, rounds: int) -> dict[str, float]:
    """dulwich's and pygit2's cold clone and warm fetch, when installed (the choice's evidence)."""
    out: dict[str, float] = {}
    try:
        import pygit2
    except ImportError:
        pygit2 = None
    try:
        from dulwich import porcelain
    except ImportError:
        porcelain = None
    if pygit2 is not None:
        d = root / "pygit2.git"
        out["pygit2 cold clone s"] = _timed(lambda: pygit2.clone_repository(url, str(d), bare=True))
        _change_one(work, 100)
        out["pygit2 warm fetch s"] = _timed(lambda: pygit2.Repository(str(d)).remotes["origin"].fetch())
    if porcelain is not None:
        d = root / "dulwich.git"
        with open(os.devnull, "wb") as null:
            out["dulwich cold clone s"] = _timed(
                lambda: porcelain.clone(url, str(d), bare=True, errstream=null)
            )
            _change_one(work, 101)
            out["dulwich warm fetch s"] = _timed(lambda: porcelain.fetch(str(d), url, errstream=null))
    return out


if __name__ == "__main__":
    for key, value in main().items():
        print(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}")
