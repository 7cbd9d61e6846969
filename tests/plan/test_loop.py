"""The reconcile loop, with an injected clock, random source and event source: no sleeps."""

from __future__ import annotations

import os
import random
import subprocess
import threading

from reconciler.clusters.base import Conflict
from reconciler.loop import BACKOFF_BASE, Reconciler, Watch

from .conftest import NOW


class Clock:
    def __init__(self, t: float = NOW):
        self.t = t

    def __call__(self) -> float:
        return self.t


def reconciler(world, clock, commit=lambda: None, **kw):
    return Reconciler(
        world.source(**kw),
        world.cluster,
        world.store,
        clock=clock,
        who="loop@h:1",
        cache=world.cache,
        rng=random.Random(1),
        commit=commit,
    )


def test_ready_after_a_full_pass_then_drift_is_undone_by_resync(world):
    world.run("a")
    world.sweep("s", parallel=2)
    clock = Clock()
    r = reconciler(world, clock)
    status = r.reconcile_once()
    assert (status["state"], status["reason"]) == ("Ready", "ReconciliationSucceeded")
    assert status["observed_revision"] == status["revision"]
    assert world.store.read("test").status == status
    world.cluster.edit("s", lambda d: d["spec"]["array"].__setitem__("max_parallel", 7))
    assert r.reconcile_once()["state"] == "Ready"
    assert world.cluster.document("s")["spec"]["array"]["max_parallel"] == 2


def test_a_change_to_one_file_replans_only_what_it_holds(world):
    for name in ("a", "b", "c"):
        world.run(name)
    clock = Clock()
    r = reconciler(world, clock)
    r.reconcile_once()
    world.cluster.calls.clear()
    changed = world.run("b", image="python:3.13")
    assert r.reconcile_once({str(changed)})["state"] == "Ready"
    touched = {name for _, name in world.cluster.calls if name}
    assert touched == {"b"}
    assert ("list", "") not in world.cluster.calls
    assert [c.address for c in r.last_plan.changes] == ["b"]


def test_a_file_moved_out_plans_its_run_away_with_prune(world):
    world.run("a")
    world.run("b")
    r = reconciler(world, Clock(), prune=True)
    r.reconcile_once()
    gone = world.root / "runs" / "b.yaml"
    gone.unlink()
    r.reconcile_once({str(gone)})
    assert world.cluster.names() == ["a"]


def test_an_invalid_commit_stalls_and_is_not_retried_until_it_changes(world):
    world.run("a")
    clock = Clock()
    r = reconciler(world, clock)
    r.reconcile_once()
    world.write("a.yaml", "metadata: {name: a}\nspec: {task_template: {image: x}, lifetime: Forever}\n")
    status = r.reconcile_once()
    assert (status["state"], status["reason"]) == ("Stalled", "ValidationFailed")
    assert "lifetime" in status["message"]
    world.cluster.calls.clear()
    clock.t += 3600
    assert r.reconcile_once() == status  # not retried: nothing changed
    assert world.cluster.calls == []
    world.write("a.yaml", "metadata: [\n")
    assert r.reconcile_once()["reason"] == "LoadFailed"
    world.run("a", image="python:3.13")
    assert r.reconcile_once()["state"] == "Ready"


def test_a_failing_run_backs_off_alone(world, monkeypatch):
    world.run("a")
    world.run("b")
    clock = Clock()
    r = reconciler(world, clock)
    real = world.cluster.create_run
    attempts = []

    def refuse_b(document):
        if document["metadata"]["name"] == "b":
            attempts.append(clock.t)
            raise Conflict("b is held by someone else")
        return real(document)

    monkeypatch.setattr(world.cluster, "create_run", refuse_b)
    status = r.reconcile_once()
    assert (status["state"], status["reason"]) == ("Reconciling", "ApplyFailed")
    assert "b: b is held by someone else" in status["message"]
    assert world.cluster.names() == ["a"] and len(attempts) == 1
    due = r.next_due()
    assert BACKOFF_BASE * 0.9 <= due - clock.t <= BACKOFF_BASE * 1.1
    r.reconcile_once()  # a resync before b is due leaves b alone
    assert len(attempts) == 1
    clock.t = due
    assert r.due() == ["b"]
    r.reconcile_once(set(), names=r.due())
    assert len(attempts) == 2
    second = r.next_due() - clock.t
    assert BACKOFF_BASE * 2 * 0.9 <= second <= BACKOFF_BASE * 2 * 1.1  # exponential
    monkeypatch.setattr(world.cluster, "create_run", real)
    clock.t += second
    assert r.reconcile_once(set(), names=r.due())["state"] == "Ready"
    assert world.cluster.names() == ["a", "b"] and r.backoff == {}


def test_watch_drives_events_and_jittered_resyncs(world):
    world.run("a")
    clock = Clock()
    r = reconciler(world, clock)
    waits: list[float] = []
    script = []

    def events(timeout):
        waits.append(timeout)
        if not script:
            return None
        step = script.pop(0)
        return step()

    def timeout_passes():
        clock.t += waits[-1]
        return set()

    def edit():
        return {str(world.run("a", image="python:3.13"))}

    statuses = []
    script += [timeout_passes, edit, timeout_passes]
    Watch(r, events, interval=60, clock=clock, rng=random.Random(3), on_status=statuses.append).run()
    assert waits[0] == 0  # the first pass at once
    assert 54 <= waits[1] <= 66  # the next resync, jittered
    assert [s["state"] for s in statuses] == ["Ready", "Ready", "Ready"]
    assert world.cluster.document("a")["spec"]["task_template"]["image"] == "python:3.13"


def test_cluster_unreachable_is_retried_later(world):
    world.run("a")
    clock = Clock()
    r = reconciler(world, clock)
    world.cluster.fail_next(100)
    status = r.reconcile_once()
    assert (status["state"], status["reason"]) == ("Reconciling", "ObserveFailed")
    assert r.retry_at is not None and r.retry_at > clock.t
    world.cluster.fail_next(0)
    clock.t = r.retry_at
    assert r.reconcile_once()["state"] == "Ready"


class SlowClock(Clock):
    """Each reading is ``step`` seconds after the last: a pass whose steps take that long."""

    def __init__(self, step: float):
        super().__init__()
        self.step = step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def written_steps(world, monkeypatch) -> list[tuple[str, str]]:
    said: list[tuple[str, str]] = []
    original = world.store.set_status

    def set_status(name, status):
        said.append((status["state"], status["step"]))
        original(name, status)

    monkeypatch.setattr(world.store, "set_status", set_status)
    return said


def test_a_quick_pass_writes_its_status_at_its_start_and_end_only(world, monkeypatch):
    world.run("a")
    r = reconciler(world, Clock())
    said = written_steps(world, monkeypatch)
    assert r.reconcile_once()["state"] == "Ready"
    assert said == [("Reconciling", "load"), ("Ready", "")]


def test_a_slow_pass_says_each_step_as_it_reaches_it(world, monkeypatch):
    world.run("a")
    r = reconciler(world, SlowClock(step=1.1))
    said = written_steps(world, monkeypatch)
    assert r.reconcile_once()["state"] == "Ready"
    assert said == [("Reconciling", "load"), ("Reconciling", "plan"), ("Reconciling", "apply"), ("Ready", "")]


def test_the_commit_is_asked_of_git_only_for_files_a_full_pass_found_in_a_repository(world):
    world.run("a")
    asked = []
    r = reconciler(world, Clock(), commit=lambda: asked.append(1) or "c0ffee")
    r.reconcile_once()
    r.reconcile_once({str(world.run("a", image="python:3.13"))})
    assert asked == []  # in no repository: no git process at each pass
    assert world.store.read("test").history[-1].commit is None
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-C", str(world.root)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "runs"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "runs"], check=True)
    r.reconcile_once({str(world.run("a", image="python:3.14"))})
    assert asked == []  # a repository made since is seen at the next full pass
    r.reconcile_once({str(world.run("a", image="python:3.11"))})
    r.reconcile_once()
    r.reconcile_once({str(world.run("a", image="python:3.12"))})
    assert asked == [1]
    assert world.store.read("test").history[-1].commit == "c0ffee"


def test_an_editors_save_of_several_events_is_seen_as_a_change_of_the_spec_alone(tmp_path):
    from reconciler.loop import FileEvents

    folder = tmp_path / "runs"
    folder.mkdir()
    spec = folder / "a.yaml"
    spec.write_text("metadata: {name: a}\n")
    events = FileEvents([str(folder)])
    assert events(0) == set()  # watching from here

    def save() -> None:  # as vim does: the old file kept aside, the new one written, the old removed
        kept = folder / "a.yaml~"
        os.replace(spec, kept)
        spec.write_text("metadata: {name: a, labels: {owner: me}}\n")
        kept.unlink()

    saver = threading.Thread(target=save)
    saver.start()
    changed = events(30)
    saver.join()
    assert changed == {str(spec)}  # the copy kept aside is no spec: not a change to plan
