"""``python -m bench --only slurm``: a team's first apply on the local Slurm cluster.

Needs the local Slurm cluster (``task slurm:up``). Measured in the same run, ``rounds`` times each,
the commands interleaved:

* the floor: a shell loop of the same ``n`` ``sbatch`` calls astra makes, one after another
  (what a person's script does): each job asks what its run asks (one core, 1 GiB, 20 minutes)
  and may start, as astra's do;
* reported beside it: the loop of ``n`` ``sbatch --hold --wrap "sleep 600"`` the issue first
  measured. Held jobs never start, and on this machine the controller, the nodes' daemons and
  the jobs share the two cores: 256 jobs starting during the submissions make each ``sbatch``
  about three times slower (3.7 ms held, 11.9 ms when the job may start, one at a time), so
  only the loop of the same calls is a floor for an apply whose runs start;
* ``astra apply -f DIR --server slurm:// --yes`` of ``n`` new single-worker runs (a cold process,
  its state folder empty): target at most ``APPLY_OVER_SBATCH`` times the floor;
* ``astra plan -f DIR --server slurm://`` of the same runs, nothing changed: at most
  ``WARM_PLAN_S`` seconds.

Every job is cancelled after each measure (``scancel`` of the jobs named by the bench only).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from .measure import run_cold

__all__ = ["APPLY_OVER_SBATCH", "WARM_PLAN_S", "main"]

#: the first apply of ``n`` runs ÷ the ``sbatch`` loop of ``n`` jobs, at most (issue 33)
APPLY_OVER_SBATCH = 1.0
#: the warm plan of those runs, seconds, at most (issue 33)
WARM_PLAN_S = 1.0
_PREFIX = "bench-slurm"
#: the loop's ``sbatch``: the calls astra makes for ``_spec``'s runs, and the held ones
_SAME = 'sbatch -Q --job-name=sbatch-loop -c 1 --mem=1G -t 20 --wrap "sleep 600" >/dev/null'
_HELD = 'sbatch -Q --hold --job-name=sbatch-loop --wrap "sleep 600" >/dev/null'


def _spec(i: int) -> str:
    return (
        f"metadata: {{name: {_PREFIX}-{i}}}\n"
        "spec:\n"
        "  task_template:\n"
        "    image: debian:12\n"
        "    command: sleep\n"
        '    args: ["600"]\n'
        "    time_limit_seconds: 20m\n"
        "    requested_resources: {cpu_cores: 1, memory_bytes: 1Gi}\n"
    )


def _cancel() -> None:
    """Cancel the bench's own jobs (the loop's and the runs'), never anybody else's."""
    listed = subprocess.run(["squeue", "-h", "-o", "%i %j"], capture_output=True, text=True, check=False)
    ids = [
        job
        for job, _, name in (line.partition(" ") for line in listed.stdout.splitlines())
        if name == "sbatch-loop" or name.startswith(_PREFIX + "-")
    ]
    for at in range(0, len(ids), 500):
        subprocess.run(["scancel", *ids[at : at + 500]], check=False, capture_output=True)


def main(astra: str, n: int = 1000, rounds: int = 3) -> dict:
    if shutil.which("sbatch") is None:
        raise SystemExit("bench: no sbatch on the PATH: start the local Slurm cluster (task slurm:up)")
    top = Path(tempfile.mkdtemp(prefix="astra-bench-slurm-"))
    try:
        runs = top / "runs"
        runs.mkdir()
        for i in range(n):
            (runs / f"r{i}.yaml").write_text(_spec(i))
        floors, helds, applies, plans = [], [], [], []
        for r in range(rounds):
            _cancel()
            floors.append(run_cold(["bash", "-c", _loop(n, _SAME)]).wall)
            _cancel()
            helds.append(run_cold(["bash", "-c", _loop(n, _HELD)]).wall)
            _cancel()
            home = top / f"home-{r}"
            home.mkdir()
            env = {**os.environ, "ASTRA_HOME": str(home)}
            applied = _timed([astra, "apply", "-f", str(runs), "--server", "slurm://", "--yes"], env)
            applies.append(applied)
            plans.append(_timed([astra, "plan", "-f", str(runs), "--server", "slurm://"], env))
            _cancel()
        floor, held, apply, plan = (statistics.median(x) for x in (floors, helds, applies, plans))
        out = {
            "n": n,
            "rounds": rounds,
            "sbatch_loop_s": round(floor, 3),
            "held_sbatch_loop_s": round(held, 3),
            "first_apply_s": round(apply, 3),
            "apply_over_sbatch": round(apply / floor, 3),
            "apply_over_held_sbatch": round(apply / held, 3),
            "apply_target": APPLY_OVER_SBATCH,
            "warm_plan_s": round(plan, 3),
            "warm_plan_target_s": WARM_PLAN_S,
        }
        print(
            f"  {n} runs: sbatch loop {floor:.2f} s (held: {held:.2f} s), first apply {apply:.2f} s "
            f"({apply / floor:.2f}x, target <= {APPLY_OVER_SBATCH}x: "
            f"{'MET' if apply / floor <= APPLY_OVER_SBATCH else 'MISS'}); warm plan {plan:.2f} s "
            f"(target <= {WARM_PLAN_S} s: {'MET' if plan <= WARM_PLAN_S else 'MISS'}); "
            f"÷ the held loop {apply / held:.2f}x"
        )
        return out
    finally:
        _cancel()
        shutil.rmtree(top, ignore_errors=True)


def _loop(n: int, one: str) -> str:
    return f"for i in $(seq {n}); do {one}; done"


def _timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench: {' '.join(argv)} exited {done.returncode}:\n{done.stderr}{done.stdout}")
    return wall
