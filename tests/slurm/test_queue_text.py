"""The queue read fast (``squeue -O``'s text) gives the rows ``squeue --json`` gives, on a REAL
local Slurm cluster (`task slurm:up`): jobs in steady states of every kind astra reads (an array
with its cap and its pending rest, a held job, a job that failed, one that completed, a
heterogeneous job), both readings taken, and every field astra uses compared."""

from __future__ import annotations

import subprocess
import uuid

import pytest

from reconciler.clusters.slurm.commands import SlurmCommands
from reconciler.clusters.slurm.decode import describe

from .test_integration import UP_HINT, _cluster_up, wait_for


def _sbatch(nonce: str, *args: str) -> int:
    out = subprocess.run(
        # Slurm writes a job's output where it was submitted from: not into the checkout.
        ["sbatch", "--parsable", "--output=/dev/null", f"--comment=astra/v1,spec=t,sub={nonce}", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out.split(";")[0])


def _ours(rows, nonce: str):
    return sorted((r for r in rows if r.comment.endswith(f"sub={nonce}")), key=lambda r: r.job_id)


def _fields(row):
    """What astra reads of a row; a live job's end is Slurm's guess, which ``--json`` and the
    text write differently (a year ahead, or NONE), and no reading of a live job uses it."""
    ended = row.state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")
    return (
        row.job_id,
        row.array_job_id,
        row.array_task_id,
        row.array_task_string,
        row.state,
        row.reason,
        row.exit_code,
        row.start,
        row.end if ended else None,
        row.nodes,
        row.name,
        row.comment,
        row.het_job_id,
        row.het_job_offset,
    )


def test_the_text_reading_equals_the_json_reading():
    problem = _cluster_up()
    if problem is not None:
        pytest.fail(f"The local Slurm cluster is not up: {problem}; {UP_HINT}", pytrace=False)
    nonce = uuid.uuid4().hex[:12]
    ids = [
        _sbatch(nonce, "--job-name=qt-arr", "--array=0-5%2", "--wrap", "sleep 120"),
        _sbatch(nonce, "--job-name=qt-held", "--hold", "--wrap", "sleep 120"),
        _sbatch(nonce, "--job-name=qt-fail", "--wrap", "exit 3"),
        _sbatch(nonce, "--job-name=qt-ok", "--wrap", "true"),
        _sbatch(nonce, "--job-name=qt-het", "--wrap", "sleep 120", ":", "--wrap", "sleep 120"),
    ]
    commands = SlurmCommands(None)
    try:
        wait_for(
            "the short jobs end and two copies of the array run",
            lambda: _ours(commands.squeue(), nonce),
            lambda rows: (
                {r.name for r in rows if r.state in ("FAILED", "COMPLETED")} == {"qt-fail", "qt-ok"}
                and sum(r.name == "qt-arr" and r.state == "RUNNING" for r in rows) == 2
            ),
            timeout=60,
        )
        # both readings of one moment: the text, the JSON, and the text again unchanged
        before, full, _ = wait_for(
            "the queue holds still for a moment",
            lambda: tuple(
                _ours(read(), nonce) for read in (commands.squeue, commands.squeue_json, commands.squeue)
            ),
            lambda three: [_fields(r) for r in three[0]] == [_fields(r) for r in three[2]],
            timeout=20,
        )
        assert [_fields(r) for r in before] == [_fields(r) for r in full]
        assert [describe(r, None) for r in before] == [describe(r, None) for r in full]
        rest = next(r for r in before if r.name == "qt-arr" and r.array_task_id is None)
        assert (rest.array_task_string, rest.array_max_tasks) == ("2-5%2", 2)
        assert describe(rest, None).reason == "Array runs at most 2 workers at once"
        assert next(r for r in before if r.name == "qt-fail").exit_code == 3 << 8
    finally:
        subprocess.run(["scancel", *map(str, ids)], check=False)


def test_squeue_asks_for_the_runs_names_and_reads_every_job_when_they_are_many(monkeypatch):
    """``--name`` of the runs when they are few (``NAMES_AT_MOST``); else every job: squeue's
    filter costs jobs x names, more than reading every job once the names are many."""
    from reconciler.clusters.slurm.commands import NAMES_AT_MOST, SlurmCommands

    asked: list[list[str]] = []
    commands = SlurmCommands(None)
    monkeypatch.setattr(commands, "run", lambda argv, **kw: asked.append(argv) or "")
    commands.squeue(["b", "a"])
    few = [f"run-{i}" for i in range(NAMES_AT_MOST)]
    commands.squeue(few)
    commands.squeue([*few, "one-more"])
    assert asked[0][-2:] == ["--name", "a,b"]
    assert asked[1][-2:] == ["--name", ",".join(sorted(few))]
    assert "--name" not in asked[2]


def test_a_queue_gives_a_run_the_rows_a_full_parse_gives_it():
    """``Queue`` parses only the lines of the submissions asked for: the rows it gives equal
    those of the whole text parsed and kept by their comment's nonce, among other users' jobs
    (no comment, a comment of their own, a name that holds ``,sub=`` and ``|``), an array's
    rows (its cap read from its pending rest) and a heterogeneous job."""
    from reconciler.clusters.slurm.queue import Queue, parse_squeue_text
    from reconciler.clusters.slurm.submission import parse_comment

    ours = "astra/v1,spec=aa,sub="
    lines = [
        f"10|10|N/A|RUNNING|None|0|1700000000|1700003600|vm-n1|N/A|N/A|{ours}n1|train",
        f"11|11|2-5%2|PENDING|JobArrayTaskLimit|0|0|0||N/A|N/A|{ours}n2|sweep",
        f"12|11|0|RUNNING|None|0|1700000000|0|vm-n2|N/A|N/A|{ours}n2|sweep",
        f"13|11|1|COMPLETED|None|0|1700000000|1700000100|vm-n2|N/A|N/A|{ours}n2|sweep",
        f"14|14|N/A|RUNNING|None|0|1700000000|0|vm-n1|14|0|{ours}n3|gang",
        f"15|15|N/A|RUNNING|None|0|1700000000|0|vm-n2|14|1|{ours}n3|gang",
        "16|16|N/A|RUNNING|None|0|1700000000|0|vm-n1|N/A|N/A||someone,sub=n1|else",
        "17|17|N/A|PENDING|Priority|0|0|0||N/A|N/A|their own,sub=n1 note|theirs",
        f"18|18|N/A|CANCELLED|None|15|1700000000|1700000009|vm-n1|N/A|N/A|{ours}old|train",
        "19|19|N/A|RUNNING|None|0|1700000000|0|vm-n1|N/A|N/A|astra/v1,sub=n4,spec=bb|fields-reordered",
    ]
    text = "\n".join(lines) + "\n"
    queue = Queue(text)
    every = parse_squeue_text(text)
    for nonces in (["n1"], ["n2"], ["n3"], ["n4"], ["n2", "n1"], ["old", "n1"], ["none"]):
        record = {"attempts": [{"nonce": n} for n in nonces]}
        full = [r for n in nonces for r in every if (m := parse_comment(r.comment)) and m["sub"] == n]
        assert queue.of(record) == full
    assert [r.array_max_tasks for r in queue.of({"attempts": [{"nonce": "n2"}]})] == [2, 2, 2]
    assert [r.job_id for r in queue.of({"attempts": [{"nonce": "n4"}]})] == [19]


def test_a_new_max_parallel_is_judged_by_the_copies_still_waiting(monkeypatch):
    """``throttle`` reads the array's own rows (``squeue -j``) after ``scontrol update``: the cap
    on the waiting copies' row is the answer, whatever scontrol's exit said; an array with no
    copy waiting has nothing left to cap."""
    from reconciler.clusters.base import ClusterError
    from reconciler.clusters.slurm.commands import SlurmCommands

    running = "41|40|0|RUNNING|None|0|1700000000|0|vm-n1|N/A|N/A|astra/v1,spec=a,sub=n|sweep\n"
    answers = {
        "took it": running + "40|40|2-5%3|PENDING|None|0|0|0||N/A|N/A|astra/v1,spec=a,sub=n|sweep\n",
        "kept the old cap": running + "40|40|2-5%2|PENDING|JobArrayTaskLimit|0|0|0||N/A|N/A|c|sweep\n",
        "none waiting": running,
    }
    asked: list[list[str]] = []
    for case, queue in answers.items():
        commands = SlurmCommands(None)

        def run(argv, check=True, env=None, queue=queue, **kw):
            asked.append(argv)
            return queue if argv[0] == "squeue" else "Job has already finished for job 40_1"

        monkeypatch.setattr(commands, "run", run)
        if case == "kept the old cap":
            with pytest.raises(ClusterError, match="Slurm did not change the array's throttle"):
                commands.throttle(40, 3, "astra/v1,spec=a,sub=n")
        else:
            commands.throttle(40, 3, "astra/v1,spec=a,sub=n")
    assert all(a[-2:] == ["-j", "40"] for a in asked if a[0] == "squeue")
