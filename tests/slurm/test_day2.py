"""The day-2 commands on the REAL local Slurm: ``astra logs`` from the jobs' output files, and
``astra rerun --failed`` (a new array of the failed copies, each seeing its original index)."""

from __future__ import annotations

import pytest

from reconciler.cli.app import run
from reconciler.clusters.slurm import SlurmCluster

from .test_integration import doc, final

SERVER = "slurm://debug"
SEES = (
    'echo "$ASTRAEUS_ARRAY_TASK_ID $RANK $ASTRAEUS_REPLICA_INDEX $ASTRAEUS_ARRAY_SIZE $WORLD_SIZE";'
    " exit $((RANK % 2))"
)


@pytest.fixture
def slurm(slurm_state, capsys):

    def cli(*argv: str) -> tuple[int, str, str]:
        code = run([*argv, "--server", SERVER])
        out, err = capsys.readouterr()
        return code, out, err

    return SlurmCluster.from_url(SERVER, state_dir=slurm_state), cli


def test_logs_and_rerun_failed_on_slurm(slurm):
    cluster, cli = slurm
    d = doc("d2sweep", SEES, array={"size": 4, "max_parallel": 0}, task_template={"restart_policy": "Never"})
    cluster.create_run(d)
    assert final(cluster, "d2sweep", 120).state == "Failed"
    assert cli("logs", "d2sweep-3") == (0, "3 3 3 4 4\n", "")
    code, out, _ = cli("logs", "d2sweep", "--all")
    assert code == 0 and out.splitlines() == [f"d2sweep-{i} | {i} {i} {i} 4 4" for i in range(4)]
    assert cli("astraeus", "logs", "d2sweep-1") == (0, "1 1 1 4 4\n", "")
    code, _, err = cli("logs", "d2sweep-1", "--attempt", "1")
    assert (code, err) == (
        1,
        f"astra: error: {SERVER} keeps the latest attempt's output only: leave out --attempt\n",
    )
    assert cli("logs", "d2sweep-1", "--since", "10m") == (  # a job's output files keep no times
        1,
        "",
        f"astra: error: {SERVER} does not record when each line of output was written: "
        "leave out --since (--tail N shows the last lines)\n",
    )

    code, out, err = cli("rerun", "d2sweep", "--failed", "--yes")
    assert code == 0, err
    shown, done = out.splitlines()[:2]  # what it will create, then what it did
    assert shown == "+ d2sweep-rerun-1  a new array of the 2 copies of d2sweep that did not complete: no GPU"
    assert done == "d2sweep-rerun-1: reruns 2 failed copies of d2sweep (1,3)"
    rerun = final(cluster, "d2sweep-rerun-1", 120)
    assert rerun.document["spec"]["array"]["size"] == 2
    assert [cluster.logs(f"d2sweep-rerun-1-{i}") for i in range(2)] == ["1 1 1 4 4\n", "3 3 3 4 4\n"]
    code, out, _ = cli("describe", "run", "d2sweep")
    assert code == 0 and "Reruns:    d2sweep-rerun-1" in out
    assert "Events:    slurm://debug keeps none" in out
    code, out, _ = cli("describe", "run", "d2sweep-rerun-1")
    assert "Rerun of:  d2sweep (its indices 1,3)" in out
    assert cli("delete", "d2sweep-rerun-1", "d2sweep", "--yes")[0] == 0
    assert cluster.get_run("d2sweep") is None
