"""Runs that wait for runs (``spec.depends_on``) on the REAL local Slurm cluster: a chain applied
from one folder runs in order through Slurm's own ``--dependency`` on the jobs astra holds, and a
chain whose first run fails fails the rest, in words (``Run preprocess ended Failed; this run
needs it Completed``), in ``astra get runs`` and ``describe``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from reconciler.cli.app import run
from reconciler.clusters.slurm import SlurmCluster

from .test_integration import final, wait_for

SERVER = "slurm://debug"

STEP = """metadata: {{name: {name}}}
spec:
{deps}  task_template:
    image: debian:12
    command: sh
    args: ["-c", "date +%s.%N > {out}/{name}.start; {body}; date +%s.%N > {out}/{name}.end"]
    restart_policy: Never
"""


@pytest.fixture
def slurm(slurm_state, capsys):

    def cli(*argv: str) -> tuple[int, str, str]:
        code = run([*argv, "--server", SERVER])
        out, err = capsys.readouterr()
        return code, out, err

    return SlurmCluster.from_url(SERVER, state_dir=slurm_state), cli


def _chain(folder: Path, out: Path, prefix: str, first_body: str) -> list[str]:
    """preprocess → train → eval, one file each, named so that a create by name would go wrong."""
    names = [f"{prefix}c-pre", f"{prefix}b-train", f"{prefix}a-eval"]
    folder.mkdir()
    out.mkdir()
    bodies = [first_body, "sleep 1", "true"]
    for i, (name, body) in enumerate(zip(names, bodies, strict=True)):
        deps = f"  depends_on: [{{run: {names[i - 1]}}}]\n" if i else ""
        (folder / f"{name}.yaml").write_text(STEP.format(name=name, deps=deps, out=out, body=body))
    return names


def _job_dependency(cluster: SlurmCluster, name: str) -> str:
    job = cluster.records.load(name)["attempts"][0]["job_id"]
    shown = subprocess.run(["scontrol", "show", "job", str(job)], capture_output=True, text=True).stdout
    return next(w for w in shown.split() if w.startswith("Dependency="))


def test_a_chain_applied_from_one_folder_runs_in_order(slurm, tmp_path: Path):
    cluster, cli = slurm
    out = tmp_path / "out"
    pre, train, ev = _chain(tmp_path / "runs", out, "ok", "sleep 3")
    try:
        code, said, err = cli("apply", "-f", str(tmp_path / "runs"), "--yes")
        assert code == 0, said + err
        assert "3 created" in said
        pre_job = cluster.records.load(pre)["attempts"][0]["job_id"]
        assert _job_dependency(cluster, train).startswith(f"Dependency=afterok:{pre_job}")
        waiting = wait_for(
            "train waits for preprocess in words",
            lambda: cluster.get_run(train),
            lambda r: r is not None and r.reason.startswith(f"Waiting for run {pre} ("),
            30,
        )
        assert waiting.state == "Pending"
        code, listed, _ = cli("get", "runs", ev, "-o", "json")
        assert code == 0 and f"Waiting for run {train} (" in listed
        for name in (pre, train, ev):
            assert final(cluster, name, 120).state == "Completed", cluster.get_run(name)
        times = {
            n: [float((out / f"{n}.{e}").read_text()) for e in ("start", "end")] for n in (pre, train, ev)
        }
        assert times[pre][1] <= times[train][0] and times[train][1] <= times[ev][0], times
    finally:
        cli("delete", pre, train, ev, "--yes")


def test_a_chain_whose_first_run_fails_fails_the_rest_in_words(slurm, tmp_path: Path):
    cluster, cli = slurm
    out = tmp_path / "out"
    pre, train, ev = _chain(tmp_path / "runs", out, "bad", "exit 3")
    try:
        code, said, err = cli("apply", "-f", str(tmp_path / "runs"), "--yes")
        assert code == 0, said + err
        assert final(cluster, pre, 60).state == "Failed"
        failed = final(cluster, train, 60)
        words = f"Run {pre} ended Failed; this run needs it Completed"
        assert (failed.state, failed.reason) == ("Failed", words)
        after = final(cluster, ev, 60)
        assert (after.state, after.reason) == (
            "Failed",
            f"Run {train} ended Failed; this run needs it Completed",
        )
        code, listed, _ = cli("get", "runs", "-o", "json")
        assert code == 0 and words in listed, listed
        code, shown, _ = cli("describe", "run", train)
        assert code == 0 and f"Reason:    {words}" in shown and f"- run: {pre}" in shown, shown
        assert [(w.state, w.reason) for w in cluster.workers(train)] == [("Stopped", f"Not run: {words}")]
        assert not (out / f"{train}.start").exists() and not (out / f"{ev}.start").exists()
        jobs = [str(cluster.records.load(n)["attempts"][0]["job_id"]) for n in (train, ev)]
        states = subprocess.run(
            ["squeue", "-h", "-t", "all", "-j", ",".join(jobs), "-o", "%T"], capture_output=True, text=True
        ).stdout.split()
        assert states == ["CANCELLED", "CANCELLED"]  # astra ended them: nothing is left in the queue
    finally:
        cli("delete", pre, train, ev, "--yes")


def _run(name: str, *deps: tuple[str, str]) -> object:
    from reconciler.runspec.parse import parse_run

    spec = {"task_template": {"image": "i", "command": "true"}}
    if deps:
        spec["depends_on"] = [{"run": r, "when": w} for r, w in deps]
    return parse_run({"metadata": {"name": name}, "spec": spec})


def test_the_dependency_is_on_every_job_astra_holds_and_when_is_slurm_s_type():
    from reconciler.clusters.slurm.dependencies import dependency_option, job_ids, waves

    array = {
        "kind": "array",
        "size": 3,
        "attempts": [
            {"job_id": 40, "indices": None},
            {"job_id": 47, "indices": [1]},  # copy 1 restarted: its own job
        ],
    }
    single = {"kind": "single", "size": 1, "attempts": [{"job_id": 50, "indices": None}]}
    assert job_ids(array) == ["40_0", "40_2", "47"]
    assert job_ids(single) == ["50"]
    run = _run("ev", ("sweep", "Completed"), ("prep", "Failed"), ("late", "Finished"))
    option, missing = dependency_option(run, {"sweep": array, "prep": single, "late": None})
    assert option == "--dependency=afterok:40_0:40_2:47,afternotok:50"
    assert missing == ["late"]
    chain = [_run("a-eval", ("b-train", "Completed")), _run("b-train", ("c-pre", "Completed")), _run("c-pre")]
    assert waves(chain) == [[2], [1], [0]]  # created in dependency order, not by name
