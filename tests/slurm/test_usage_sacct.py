"""``astra usage --server slurm://`` (issue 35): Slurm's accounting (sacct) added up as the
control plane's ``GET /usage`` is; on the local cluster, whose accounting is off, the words say
how to turn it on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from reconciler.clusters.slurm.accounting import TURN_ON, parse_sacct

ROOT = Path(__file__).resolve().parents[2]

#: ``sacct -X -n -P -o JobID,JobName,Account,User,AllocTRES,ElapsedRaw,State``, as Slurm 22 prints it.
SACCT = """\
101|train|team-a|ann|billing=16,cpu=16,gres/gpu=4,mem=64G,node=1|3600|COMPLETED
102_0|sweep|team-a|ann|cpu=2,gres/gpu=1,mem=8G,node=1|120|COMPLETED
102_1|sweep|team-a|ann|cpu=2,gres/gpu=1,mem=8G,node=1|60|FAILED
103|prep|team-b|bob|cpu=4,mem=16G,node=1|900|COMPLETED
104|eval|team-b|bob|cpu=8,gres/gpu=2,mem=32G,node=1|30|CANCELLED by 1000
105|eval2|team-b|bob|cpu=8,gres/gpu=2,mem=32G,node=1|45|TIMEOUT
"""


def test_sacct_s_jobs_add_up_by_account_and_by_job_name():
    by_ws = parse_sacct(SACCT.splitlines(), "workspace")
    assert [(i["key"], i["gpu_seconds"], i["wasted_gpu_seconds"], i["runs"]) for i in by_ws] == [
        ("team-a", 4 * 3600 + 120 + 60, 60, 2),
        ("team-b", 2 * 30 + 2 * 45, 2 * 45, 2),
    ]
    by_run = {i["key"]: i["gpu_seconds"] for i in parse_sacct(SACCT.splitlines(), "run")}
    assert by_run == {"train": 14400, "sweep": 180, "eval": 60, "eval2": 90}


def test_astra_usage_on_the_local_slurm_cluster_says_how_to_turn_accounting_on():
    done = subprocess.run(
        [sys.executable, "-m", "reconciler.cli", "usage", "--server", "slurm://"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 1
    assert TURN_ON in done.stderr
    assert "Traceback" not in done.stderr
