"""A real ``astra server`` (a subprocess on a free port of 127.0.0.1): the seeds' own commands, end to end."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from reconciler.cli.local_server import ensure_server
from reconciler.controlplane.server import read_info, stop_server
from reconciler.runspec.vocabulary import WorkerState

from .conftest import LONG, ROOT, SEEDS, TOKEN, until

FINAL = ("Completed", "Failed", "Cancelled")

# The seeds' commands, verbatim (000: run.json to $WS_API/runs; 001: sweep.json to $API/jobs).
CURL_RUN = """curl -sS -X POST "$WS_API/runs" -H "Authorization: Bearer $ASTRAEUS_TOKEN" \\
    -H 'content-type: application/json' -d @run.json"""
CURL_SWEEP = """curl -sS -X POST "$API/jobs" -H "Authorization: Bearer $ASTRA_TOKEN" \\
    -H 'Content-Type: application/json' --data-binary @sweep.json | jq .spec.array"""
CURL_COUNTS = """curl -sS "$API/jobs/sweep" -H "Authorization: Bearer $ASTRA_TOKEN" | jq .task_counts"""

SWEEP_SBATCH = """#!/bin/bash
#SBATCH --array=0-99%8
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=8
#SBATCH --mem=32G
#SBATCH --time=1:00:00
#SBATCH --container-image=registry.example.com/ml/sweep:1
python /opt/sweep/sweep.py
"""


def shell(live, command: str) -> str:
    env = {**live.env, "WS_API": live.url + LONG, "API": live.url + "/api", "ASTRAEUS_TOKEN": TOKEN}
    done = subprocess.run(
        ["bash", "-c", command], cwd=live.cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_seeds_curl_commands_work_verbatim(live):
    shutil.copy(SEEDS / "llama-ft.json", live.cwd / "run.json")
    shutil.copy(SEEDS / "sweep.json", live.cwd / "sweep.json")
    for drive in ("datasets", "results"):  # the drives the seeds' sweep mounts, as the README makes them
        assert live.astra("drive", "create", drive).returncode == 0
    created = json.loads(shell(live, CURL_RUN))
    assert created["metadata"]["name"] == "llama-ft" and created["status"]["state"] == "Pending"
    assert shell(live, CURL_SWEEP) == '{\n  "size": 100,\n  "max_parallel": 8\n}\n'
    counts = json.loads(shell(live, CURL_COUNTS))
    assert set(counts) <= {"Pending", "Running", "Completed", "Failed"} and sum(counts.values()) == 100


def test_the_seeds_sweep_curl_on_a_fresh_server_prints_the_seeds_lines_and_starts_once_both_drives_exist(
    live,
):
    shutil.copy(SEEDS / "sweep.json", live.cwd / "sweep.json")  # no drive made: a fresh server
    assert shell(live, CURL_SWEEP) == '{\n  "size": 100,\n  "max_parallel": 8\n}\n'
    assert json.loads(shell(live, CURL_COUNTS)) == {"Pending": 100}

    def reasons() -> set[str]:
        return {w["reason"] for w in live.api("GET", "/runs/sweep/workers").json()["items"]}

    said = "Drive '{}' does not exist in workspace default: astra drive create {} --path DIR"
    until(lambda: reasons() == {said.format("datasets", "datasets")})
    assert live.astra("drive", "create", "datasets").returncode == 0
    until(lambda: reasons() == {said.format("results", "results")})
    attempts = lambda: [w["attempts"] for w in live.api("GET", "/runs/sweep/workers").json()["items"]]  # noqa: E731
    assert set(attempts()) == {0}  # none started while a drive was missing
    assert live.astra("drive", "create", "results").returncode == 0
    until(lambda: sum(a > 0 for a in attempts()) >= 8)  # the copies start, 8 at a time
    assert not any(r.startswith("Drive ") for r in reasons()), reasons()  # none says it waits still


def test_the_seeds_cli_examples_print_what_the_seeds_print(live):
    done = live.astra(
        "astraeus", "run", "--name", "llama-ft",
        "--image", "nvcr.io/nvidia/pytorch:24.08-py3",
        "--gpus", "16", "--cpus", "12", "--mem", "120G",
        "--time", "12h",
        "--", "sh", "-c", "torchrun --nnodes=$WORLD_SIZE --node-rank=$RANK --nproc-per-node=gpu "
        "--master-addr=$MASTER_ADDR --master-port=$MASTER_PORT train.py",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    console = "/o/default/w/default/jobs/default"
    assert done.stdout == f"llama-ft submitted to default: {live.url}{console}/llama-ft\n"
    spec = live.api("GET", "/runs/llama-ft").json()["spec"]
    template = spec["task_template"]
    assert spec["start"] == "Independent" and template["restart_policy"] == "Never"
    assert template["requested_resources"] == {
        "gpu_requests": {"count": 16},
        "per_gpu": {"cpu_cores": 12, "memory_bytes": 128849018880},
    }
    assert template["time_limit_seconds"] == 43200 and template["command"] == "sh"

    (live.cwd / "sweep.sbatch").write_text(SWEEP_SBATCH)
    done = live.astra("slurm", "sbatch", "sweep.sbatch")
    assert (done.returncode, done.stdout) == (0, "Submitted batch job sweep\n"), done.stderr
    sweep = live.api("GET", "/runs/sweep").json()["spec"]
    assert sweep["array"] == {"size": 100, "max_parallel": 8}
    assert sweep["task_template"]["requested_resources"] == {
        "cpu_cores": 8,
        "memory_bytes": 34359738368,
        "gpu_requests": {"count": 1},
    }
    until(
        lambda: live.api("GET", "/runs/sweep/workers").json()["items"][17]["state"] in ("Failed", "Completed")
    )

    done = live.astra("astraeus", "workers", "sweep")
    lines = done.stdout.splitlines()
    assert lines[0] == "WORKER                        RANK   STATE       MACHINE               REASON"
    assert lines[1].startswith("sweep-0                       0      ")
    assert lines[-1].startswith("Workers ") and lines[-1].endswith(" running of 100")
    last = [x for x in lines if x.startswith("sweep-99 ")]  # Pending, or already run (copies fail fast)
    assert last and last[0].split()[2] in {str(s) for s in WorkerState}
    running = sum(1 for x in lines[1:-1] if x.split()[2] == "Running")
    assert lines[-1] == f"Workers {running} running of 100"
    as_json = json.loads(live.astra("astraeus", "workers", "sweep", "-o", "json").stdout)
    assert len(as_json) == 100 and as_json[0]["name"] == "sweep-0"
    assert "- name: sweep-0" in live.astra("astraeus", "workers", "sweep", "-o", "yaml").stdout

    logs = live.astra("astraeus", "logs", "sweep-17")
    # the copy ran the seed's command: python says the script is not there (or, for a worker
    # of a root server, run as nobody, that python is not on the PATH it may read)
    ran = "/opt/sweep/sweep.py" in logs.stdout or "python: command not found" in logs.stdout
    assert logs.returncode == 0 and ran, logs.stdout


def test_an_unknown_sbatch_directive_is_a_clear_error_naming_it(live):
    (live.cwd / "x.sbatch").write_text("#!/bin/sh\n#SBATCH --nodes=2\n#SBATCH --container-image=x\necho\n")
    done = live.astra("slurm", "sbatch", "x.sbatch")
    assert done.returncode == 1
    assert done.stderr.startswith("astra: error: x.sbatch:2: unknown #SBATCH directive '--nodes'")
    assert "Traceback" not in done.stderr


def test_a_20_copy_array_runs_as_processes_within_its_cap(live, tmp_path):
    out = live.home / "work" / "e2e"  # the run's own folder: its copies share it (docs/sandbox.md)
    doc = {
        "metadata": {"name": "e2e"},
        "spec": {
            "array": {"size": 20, "max_parallel": 4},
            "task_template": {
                "image": "busybox",
                "command": "sh",
                "args": ["-c", 'env > "$OUT/$ASTRAEUS_ARRAY_TASK_ID.env"; test "$RANK" != 13 || exit 7'],
                "env": {"OUT": str(out)},
                "restart_policy": "Never",
                "requested_resources": {"cpu_cores": 1},
            },
        },
    }
    assert live.api("POST", "/runs", json=doc).status_code == 201
    run = until(
        lambda: (r := live.api("GET", "/runs/e2e").json())["status"]["state"] in FINAL and r,
        what="the array to end",
    )
    assert run["task_counts"] == {"Completed": 19, "Failed": 1}
    workers = {w["name"]: w for w in live.api("GET", "/runs/e2e/workers").json()["items"]}
    bad = workers["e2e-13"]
    assert (bad["state"], bad["exit_code"]) == ("Failed", 7)
    assert run["status"]["state"] == "Failed"
    assert run["status"]["reason"] == (
        f"1 of 20 workers failed; the first: Worker e2e-13 failed on {bad['machine']}: Exited with code 7"
    )
    for i in range(20):
        env = dict(line.split("=", 1) for line in (out / f"{i}.env").read_text().splitlines())
        assert env.pop("PWD") == str(out)  # set by sh itself
        assert env == {
            "PATH": os.environ["PATH"],
            "HOME": os.environ["HOME"],
            "OUT": str(out),
            "RANK": str(i),
            "WORLD_SIZE": "20",
            "SLURM_PROCID": str(i),
            "SLURM_NTASKS": "20",
            "ASTRAEUS_ATTEMPT": "0",
            "ASTRAEUS_ARRAY_TASK_ID": str(i),
            "ASTRAEUS_ARRAY_SIZE": "20",
            "ASTRAEUS_REPLICA_INDEX": str(i),
        }
    # at most 4 at once, from the recorded start and end of every copy
    changes = []
    for e in live.api("GET", "/runs/e2e/events").json()["items"]:
        if e["kind"] == "StartWorker":
            changes.append((e["at"], 1))
        elif e["kind"] == "WorkerExited":
            changes.append((e["at"], -1))
    assert sum(1 for _, d in changes if d == 1) == 20
    running = peak = 0
    for _, d in sorted(changes, key=lambda c: (c[0], c[1])):
        running += d
        peak = max(peak, running)
    assert 1 <= peak <= 4


def test_a_restarted_server_marks_running_workers_lost_and_restarts_them(live):
    doc = {
        "metadata": {"name": "svc"},
        "spec": {"task_template": {"image": "busybox", "command": "sleep", "args": ["300"]}},
    }
    live.api("POST", "/runs", json=doc)
    until(lambda: live.api("GET", "/workers/svc-0").json()["state"] == "Running")
    live.stop()
    live.start()
    w = live.api("GET", "/workers/svc-0").json()
    assert w["reason"].startswith("Lost: its process was gone when the control plane restarted")
    assert w["restarts"] == 1


def test_the_embedded_server_starts_on_demand_and_is_reused(tmp_path, monkeypatch):
    for var in ("ASTRA_SERVER", "ASTRA_TOKEN", "ASTRA_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    (tmp_path / ".astra").mkdir()  # a project's own cluster: found as git finds .git
    try:
        url, token = ensure_server()
        home = tmp_path / ".astra"
        assert read_info(home).url == url
        assert (home / "token").stat().st_mode & 0o777 == 0o600
        assert token == (home / "token").read_text().strip()
        assert ensure_server() == (url, token)
        done = subprocess.run(
            [sys.executable, "-m", "reconciler.cli", "slurm", "sbatch", "job.sh"],
            input=None,
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**os.environ},
        )
        assert "cannot read job.sh" in done.stderr
    finally:
        stopped = stop_server(tmp_path / ".astra")
    assert stopped is not None and read_info(tmp_path / ".astra") is None


RUN_SPEC = """metadata: {{name: {name}}}
spec:
  task_template:
    image: python:3.12
    command: "true"
    requested_resources: {{gpu_requests: {{count: 1}}}}
"""


def test_a_plan_reads_the_server_in_a_forked_process_while_it_loads_its_files(live, monkeypatch):
    """Over a real socket, the inventory and the run summaries are read by a forked process
    (``cores.aside``) while the files load here: the plan is the one made without it."""
    from reconciler import readahead, reconcile
    from reconciler.cli.planning import setup
    from reconciler.load import FileCache
    from reconciler.plan import plan_to_json

    folder = live.cwd / "runs"
    folder.mkdir()
    for i in range(4):
        (folder / f"r{i}.yaml").write_text(RUN_SPEC.format(name=f"r{i}"))
    applied = live.astra("apply", "-f", "runs", "--yes", "--source", "s", "--wait")
    assert applied.returncode == 0, applied.stderr
    (folder / "r0.yaml").write_text(RUN_SPEC.format(name="r0").replace("python:3.12", "python:3.13"))
    monkeypatch.chdir(live.cwd)
    monkeypatch.setattr(readahead, "forkable", lambda n, minimum: n >= minimum)  # whatever threads pytest has
    forks, listed_here = [], []
    real_aside, real_summaries = readahead.aside, reconcile.summaries
    monkeypatch.setattr(readahead, "aside", lambda work: forks.append(1) or real_aside(work))

    def summaries(cluster):  # counted in this process only: the forked one keeps its own count
        listed_here.append(1)
        return real_summaries(cluster)

    monkeypatch.setattr(reconcile, "summaries", summaries)

    def plan(read_apart_from: int) -> dict:
        monkeypatch.setattr(readahead, "READ_APART_FROM", read_apart_from)
        s = setup(["runs"], source="s", state=None, server=live.url, token=TOKEN)
        made = reconcile.plan_source(s.source, s.cluster, s.store, 1.0, cache=FileCache(live.cwd / "c"))
        return plan_to_json(made)

    apart = plan(2)
    assert forks == [1] and listed_here == []  # listed apart, and what it read was used
    here = plan(1000)
    assert forks == [1] and listed_here == [1]
    assert apart == here

    # an apply takes the lock before it plans: its connection is open, and a copy of the cluster
    # and the store, with connections of their own, reads apart all the same
    monkeypatch.setattr(readahead, "READ_APART_FROM", 2)
    s = setup(["runs"], source="s", state=None, server=live.url, token=TOKEN)
    lock = s.store.lock("s", "me@here:1", 1.0)
    made = reconcile.plan_source(s.source, s.cluster, s.store, 1.0, cache=FileCache(live.cwd / "c"))
    assert forks == [1, 1] and listed_here == [1] and plan_to_json(made) == apart
    s.store.unlock("s", lock.id)  # over the connection the forked process left alone
    changed = [(c["address"], c["action"]) for c in apart["changes"] if c["action"] != "noop"]
    assert changed == [("r0", "replace")]

    monkeypatch.setattr(readahead, "READ_APART_FROM", 2)
    s = setup(["runs"], source="s", state=None, server=live.url, token="not-the-token")
    with pytest.raises(Exception, match="401"):  # the reads failed apart: that is the plan's error
        reconcile.plan_source(s.source, s.cluster, s.store, 1.0, cache=FileCache(live.cwd / "c"))
    assert forks == [1, 1, 1]
