"""GPU-hours from Slurm's accounting: ``sacct``'s jobs, added up as ``astra usage`` shows them.

Owns: ``read_usage`` (runs ``sacct`` for a period and adds up its jobs' GPUs × elapsed seconds,
by account, job name or user; those that ended FAILED, NODE_FAIL, OUT_OF_MEMORY or TIMEOUT as
wasted), ``parse_sacct`` (the pure part: ``sacct -P``'s lines to the same lines as ``GET
/usage``'s) and ``AccountingOff`` (a cluster whose accounting keeps nothing, as the local test
cluster's, with the words that say how to turn it on).

A Slurm job's account is astra's workspace (``--account``), its name the run's. Must not
touch: the Slurm cluster's runs (``cluster``), the control plane.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

__all__ = ["FIELDS", "AccountingOff", "parse_sacct", "read_usage"]

#: What ``sacct`` is asked for, in this order (``-o``).
FIELDS = ("JobID", "JobName", "Account", "User", "AllocTRES", "ElapsedRaw", "State")
#: The end states counted as wasted (the run ended Failed).
FAILED = frozenset({"FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "TIMEOUT", "BOOT_FAIL", "DEADLINE"})
#: What sacct says when the cluster keeps no accounting.
DISABLED = "accounting storage is disabled"
TURN_ON = (
    "Slurm's accounting is off on this cluster (sacct: 'Slurm accounting storage is disabled'), "
    "so it keeps no GPU-hours. To turn it on: run slurmdbd with a MariaDB or MySQL database, set "
    "AccountingStorageType=accounting_storage/slurmdbd and AccountingStorageTRES=gres/gpu in "
    "slurm.conf (JobAcctGatherType=jobacct_gather/linux too), restart slurmctld, and add the "
    "cluster and its accounts (sacctmgr add cluster NAME; sacctmgr add account WORKSPACE). "
    "Jobs that end from then on are counted."
)


class AccountingOff(Exception):
    """Slurm keeps no accounting here (or sacct cannot be run): the words say what to do."""


def _gpus(tres: str) -> int:
    """The GPUs of ``AllocTRES`` (``cpu=8,gres/gpu=2,mem=32G,node=1``); 0 with none."""
    for part in tres.split(","):
        key, _, value = part.partition("=")
        if key in ("gres/gpu", "gpu") and value.isdigit():
            return int(value)
    return 0


def parse_sacct(lines: Iterable[str], by: str) -> list[dict[str, Any]]:
    """``sacct -X -n -P -o FIELDS``'s lines, added up by ``workspace`` (the account), ``run``
    (the job name) or ``user``; the lines are ``GET /usage``'s."""
    sums: dict[tuple[str, str], list[Any]] = {}
    for line in lines:
        parts = line.rstrip("\n").split("|")
        if len(parts) != len(FIELDS):
            continue
        row = dict(zip(FIELDS, parts, strict=True))
        seconds = _gpus(row["AllocTRES"]) * int(row["ElapsedRaw"] or 0)
        if seconds <= 0:
            continue
        workspace = row["Account"] or "-"
        key = {"workspace": workspace, "run": row["JobName"], "user": row["User"]}.get(by, workspace)
        line_sum = sums.setdefault((workspace, key), [0, 0, set()])
        line_sum[0] += seconds
        if row["State"].split(" ")[0] in FAILED:
            line_sum[1] += seconds
        line_sum[2].add(row["JobID"].split("_")[0])
    return [
        {
            "workspace": ws,
            "key": key,
            "gpu_seconds": float(held),
            "gpu_hours": round(held / 3600, 4),
            "wasted_gpu_seconds": float(wasted),
            "wasted_gpu_hours": round(wasted / 3600, 4),
            "runs": len(jobs),
        }
        for (ws, key), (held, wasted, jobs) in sorted(sums.items())
    ]


def _when(at: float) -> str:
    return datetime.fromtimestamp(max(0.0, at), UTC).strftime("%Y-%m-%dT%H:%M:%S")


def read_usage(by: str, start: float | None, end: float) -> list[dict[str, Any]]:
    """The jobs' GPU-hours of ``[start, end)`` (UTC) from ``sacct``, grouped ``by``;
    ``AccountingOff`` when the cluster keeps none, or sacct is not there."""
    command = ["sacct", "-X", "-n", "-P", "--allusers", "-o", ",".join(FIELDS), "-E", _when(end)]
    command += ["-S", _when(start) if start is not None else "1970-01-01T00:00:00"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    except FileNotFoundError as exc:
        raise AccountingOff(
            "sacct is not installed here: astra usage reads Slurm's accounting with it"
        ) from exc
    said = (done.stdout + done.stderr).strip()
    if DISABLED in said.lower():
        raise AccountingOff(TURN_ON)
    if done.returncode != 0:
        raise AccountingOff(f"sacct failed: {said.splitlines()[-1] if said else done.returncode}")
    return parse_sacct(done.stdout.splitlines(), by)
