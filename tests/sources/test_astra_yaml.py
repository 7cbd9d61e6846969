"""astra.yaml: validated with exact, positioned messages; several sources watched in one loop,
each with its own status, one broken source never stopping the others."""

from __future__ import annotations

import random

from reconciler.clusters.fake import FakeCluster
from reconciler.git import Remote
from reconciler.loop import Fleet, Reconciler, RemoteOrigin, Watch
from reconciler.reconcile import Source
from reconciler.runspec.astrafile import load_astra_file

from .test_git_sources import NOW, Clock


def test_an_astra_file_is_checked_with_every_problem_in_place(tmp_path):
    path = tmp_path / "astra.yaml"
    path.write_text(
        "sources:\n"
        "  - name: a\n    repo: https://example.com/r.git\n    path: runs\n"
        "  - name: b\n"
        "  - name: a\n    path: runs\n    ref: main\n    intervall: 1m\n"
        "  - name: c\n    path: runs\n    interval: soon\n"
    )
    made, errors = load_astra_file(path)
    assert made is None
    assert sorted(e.format().removeprefix(f"{path}:") for e in errors) == sorted(
        [
            "4:5: sources[0].path: give a source a repo or a path, not both",
            "5:5: sources[1].path: a source needs a repo (a git URL) or a path (a folder)",
            "6:5: sources[2].name: source name 'a' is also used by sources[0]: source names must be unique",
            "8:5: sources[2].ref: only a source with a repo has a ref: a path is read as it is on disk",
            "9:5: sources[2].intervall: unknown field 'intervall'; did you mean 'interval'?",
            "12:15: sources[3].interval: must be a duration of at least 1 second: an integer (seconds), "
            "or a duration such as 90m, 12h, 1h30m, 2d, 1:00:00 or 1-12:00:00",
        ]
    )


def test_a_valid_file_resolves_its_folders_and_intervals(tmp_path):
    path = tmp_path / "astra.yaml"
    path.write_text(
        "# yaml-language-server: $schema=schema/astra.schema.json\nsources:\n"
        "  - {name: team-a, repo: 'https://example.com/r.git', ref: main, folder: runs/a,\n"
        "     interval: 1m, prune: true}\n"
        "  - {name: local, path: runs, interval: 30}\n"
    )
    made, errors = load_astra_file(path)
    assert errors == [] and made is not None
    a, local = made.sources
    assert (a.repo, a.ref, a.folder, a.interval, a.prune) == (
        "https://example.com/r.git",
        "main",
        "runs/a",
        60,
        True,
    )
    assert (local.path, local.interval) == (str(tmp_path / "runs"), 30)


def test_two_sources_in_one_loop_one_broken_the_other_applied(repo, tmp_path):
    repo.run("a")
    repo.commit("a")
    repo.push()
    clock = Clock()
    cluster = FakeCluster(now=lambda: NOW)
    store = cluster.source_store()
    good = Reconciler(
        Source("good", ("runs",), probe=False),
        cluster,
        store,
        clock=clock,
        who="w",
        origin=RemoteOrigin(Remote(repo.url, "main", home=tmp_path / "home"), "runs"),
        rng=random.Random(1),
    )
    broken = Reconciler(
        Source("broken", ("runs",), probe=False),
        cluster,
        store,
        clock=clock,
        who="w",
        origin=RemoteOrigin(Remote(f"file://{tmp_path}/none.git", "main", home=tmp_path / "home"), "runs"),
        rng=random.Random(2),
    )
    seen = []
    watches = {
        name: Watch(
            r, lambda t: set(), interval=60.0, clock=clock, on_status=lambda st, n=name: seen.append((n, st))
        )
        for name, r in (("broken", broken), ("good", good))
    }
    scripted = iter([{}, {}])
    assert Fleet(watches, lambda timeout: next(scripted, None), clock=clock).step()
    assert store.read("good").status["state"] == "Ready" and cluster.names() == ["a"]
    assert (store.read("broken").status["state"], store.read("broken").status["reason"]) == (
        "Reconciling",
        "SourceFetchFailed",
    )
    assert [n for n, _ in seen] == ["broken", "good"]
