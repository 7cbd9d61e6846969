"""``astra get runs|workers`` and ``astra describe run`` as a user reads them (fake cluster)."""

from __future__ import annotations

import json
import os
import subprocess

from reconciler.clusters.base import WorkerInfo

from .conftest import World


def applied(world: World, cli) -> None:
    """Two runs applied from files (one labelled), and one submitted by hand."""
    world.run("train")
    world.sweep("sweep", size=4, parallel=2)
    world.write("labelled.yaml", "metadata: {name: tagged, labels: {team: nlp}}\n"
                "spec: {task_template: {image: x, command: sleep}}\n")  # fmt: skip
    commit(world)
    code, _, err = cli("apply", "-f", "runs", "--source", "team-repo", "--yes")
    assert code == 0, err


#: A commit made at a fixed time by a fixed author: the same SHA on every machine.
FIXED = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z"}
FIXED |= {
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@x",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}


def commit(world: World) -> str:
    env = {**os.environ, **FIXED}
    for args in (["init", "-q", "-b", "main"], ["add", "runs"], ["commit", "-q", "-m", "runs"]):
        subprocess.run(["git", *args], cwd=world.root, env=env, check=True, capture_output=True)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=world.root, capture_output=True, text=True)
    return sha.stdout.strip()


def test_get_runs_is_a_table_of_every_run(world, cli, snapshot):
    applied(world, cli)
    world.cluster.create_run({"metadata": {"name": "by-hand"}, "spec": {"task_template": {"image": "x"}}})
    world.cluster.start("sweep", workers=2, gpus=1)
    world.now += 300
    code, out, err = cli("get", "runs")
    assert code == 0, err
    assert out == snapshot
    assert out.splitlines()[0].split() == ["NAME", "STATE", "REASON", "WORKERS", "GPUS", "AGE", "SOURCE"]
    code, wide, _ = cli("get", "runs", "-o", "wide")
    assert wide == snapshot


def test_get_runs_filters_by_name_label_and_state(world, cli):
    applied(world, cli)
    world.cluster.start("sweep", workers=2)
    assert [x.split()[0] for x in cli("get", "runs", "-l", "team=nlp")[1].splitlines()] == ["NAME", "tagged"]
    assert [x.split()[0] for x in cli("get", "runs", "--state", "running")[1].splitlines()] == [
        "NAME",
        "sweep",
    ]
    assert [x.split()[0] for x in cli("get", "runs", "train")[1].splitlines()] == ["NAME", "train"]
    assert cli("get", "runs", "-l", "team=none")[1] == "No runs on fake://test match.\n"
    code, _, err = cli("get", "runs", "nope")
    assert (code, err) == (1, "astra: error: no run nope on fake://test\n")
    code, _, err = cli("get", "runs", "-l", "team")
    assert (code, err) == (1, "astra: error: a label selector is key=value, not 'team'\n")


def test_get_runs_json_and_yaml(world, cli):
    applied(world, cli)
    code, out, _ = cli("get", "runs", "train", "-o", "json")
    [train] = json.loads(out)
    assert train["name"] == "train" and train["state"] == "Pending"
    assert (train["source"], train["file"]) == ("team-repo", "runs/train.yaml")
    assert train["revision"].startswith("main@sha1:") and len(train["revision"]) == 50
    code, out, _ = cli("get", "runs", "train", "-o", "yaml")
    assert code == 0 and out.startswith("- name: train\n  state: Pending\n")


def test_get_runs_watch_prints_again_only_on_change(world, cli, later):
    applied(world, cli)
    later += [lambda: None, lambda: world.cluster.start("train", workers=1, gpus=1)]
    code, out, _ = cli("get", "runs", "train", "--watch")
    tables = out.split("\n\n")
    assert code == 0 and len(tables) == 2  # the look that changed nothing printed nothing
    assert "Pending" in tables[0] and "Running" in tables[1] and "1/1" in tables[1]


def test_get_workers_is_the_seeds_table(world, cli):
    applied(world, cli)
    world.cluster.start("sweep", workers=2)
    code, out, _ = cli("get", "workers", "sweep")
    assert code == 0 and out == cli("astraeus", "workers", "sweep")[1]
    assert out.splitlines()[0].split() == ["WORKER", "RANK", "STATE", "MACHINE", "REASON"]
    assert out.splitlines()[-1] == "Workers 2 running of 2"


def test_describe_tells_the_run_whole(world, cli, snapshot):
    applied(world, cli)
    world.cluster.start("sweep", workers=4)
    failed = [
        WorkerInfo("sweep-0", 0, "Completed", "Exited with code 0", machine="m0", exit_code=0),
        WorkerInfo("sweep-1", 1, "Failed", "Exited with code 3", machine="m1", exit_code=3),
        WorkerInfo("sweep-2", 2, "Completed", "Exited with code 0", machine="m0", exit_code=0),
        WorkerInfo("sweep-3", 3, "Failed", "Exited with code 3", machine="m1", exit_code=3),
    ]
    reason = "2 of 4 workers failed; the first: Worker sweep-1 failed on m1: Exited with code 3"
    world.cluster.set_state("sweep", "Failed", reason, workers=failed)
    world.cluster.set_log("sweep-1", "".join(f"step {i}\n" for i in range(20)) + "Traceback: boom\n")
    world.now += 90
    code, out, err = cli("describe", "run", "sweep")
    assert code == 0, err
    assert out == snapshot
    assert "Source:    team-repo (file runs/sweep.yaml, revision " in out
    assert "  Failed (2): sweep-1, sweep-3" in out and "  Traceback: boom" in out
    assert "  step 10\n" not in out and "  step 11\n" in out  # the last ten lines


def test_describe_an_unknown_run_is_one_line(world, cli):
    assert cli("describe", "run", "ghost") == (1, "", "astra: error: no run ghost on fake://test\n")


def test_describe_shows_the_events_in_time_order_and_only_the_latest_of_many(world, cli):
    world.cluster.create_run({"metadata": {"name": "big"}, "spec": {"task_template": {"image": "x"}}})
    t0 = world.cluster.get_run("big").created_at
    events = [
        {"at": t0 + i, "kind": "StartWorker", "worker": f"big-{i}", "state": "Running", "reason": ""}
        for i in range(60)
    ]
    world.cluster.events = lambda name: list(reversed(events))  # the cluster keeps events
    out = cli("describe", "run", "big")[1]
    shown = out.split("Events:\n")[1].split("\n\n")[0].splitlines()
    assert shown[0].split() == ["AT", "KIND", "WORKER", "STATE", "REASON"]
    assert shown[1] == "  … 10 earlier events: astra describe run big --all-events"
    assert [line.split()[2] for line in shown[2:]] == [f"big-{i}" for i in range(10, 60)]
    assert shown[2].split()[0] == "+10s"
    # the command it points at shows them: every event, and no pointer
    out = cli("describe", "run", "big", "--all-events")[1]
    shown = out.split("Events:\n")[1].split("\n\n")[0].splitlines()
    assert [line.split()[2] for line in shown[1:]] == [f"big-{i}" for i in range(60)]


def test_describe_a_run_that_failed_before_placement_says_so_not_workers_0_of_0(world, cli):
    world.cluster.create_run({"metadata": {"name": "huge"}, "spec": {"task_template": {"image": "x"}}})
    world.cluster.set_state("huge", "Failed", "no machine of this cluster has 200 GPUs")
    out = cli("describe", "run", "huge")[1]
    assert "Workers:   no workers: failed before placement\n" in out
    assert "running of 0" not in out
    world.cluster.create_run({"metadata": {"name": "new"}, "spec": {"task_template": {"image": "x"}}})
    assert "Workers:   none yet: not placed\n" in cli("describe", "run", "new")[1]


def test_describe_a_rerun_says_astra_rerun_made_it_and_from_which_run(world, cli):
    notes = {"astra.rerun-of": "lr-sweep", "astra.rerun-indices": "2", "astra.rerun-size": "4"}
    meta = {"name": "lr-sweep-rerun-1", "annotations": notes}
    world.cluster.create_run({"metadata": meta, "spec": {"task_template": {"image": "x"}}})
    out = cli("describe", "run", "lr-sweep-rerun-1")[1]
    assert "Source:    made by astra rerun from run lr-sweep\n" in out
    assert "Rerun of:  lr-sweep (its indices 2)\n" in out
    assert "not applied by astra" not in out


def test_describe_shows_the_chain_of_runs_both_ways(world, cli):
    image = {"task_template": {"image": "x"}}
    world.cluster.create_run({"metadata": {"name": "prep"}, "spec": image})
    deps = [{"run": "prep"}, {"run": "tokens", "when": "Finished"}]
    world.cluster.create_run({"metadata": {"name": "train"}, "spec": {**image, "depends_on": deps}})
    world.cluster.start("prep", workers=1)
    out = cli("describe", "run", "train")[1]
    assert "Waits for: prep (when Completed; it is Running), tokens (when Finished; not created yet)\n" in out
    assert "Waited by: train (when Completed)\n" in cli("describe", "run", "prep")[1]


def test_get_workers_of_a_run_with_no_worker_says_what_it_went_through_not_0_of_0(world, cli):
    world.cluster.create_run({"metadata": {"name": "huge"}, "spec": {"task_template": {"image": "x"}}})
    world.cluster.set_state("huge", "Failed", "no machine of this cluster has 200 GPUs")
    code, out, _ = cli("get", "workers", "huge")
    assert code == 0 and out.splitlines()[1:] == ["no workers: failed before placement"]
    assert "running of 0" not in out
