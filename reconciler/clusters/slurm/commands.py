"""Slurm's commands, run with a timeout, their failures mapped onto ``ClusterError``s.

Owns: running ``sbatch``, ``squeue`` (its text format; ``--json`` as the reading it is held to),
``scontrol``, ``scancel``, ``sinfo`` and ``srun --help`` from the PATH (each within ``timeout``
seconds); what their failures mean (a missing command, a timeout or a controller that cannot be
reached is ``Unreachable``: nothing may be concluded from silence; ``sbatch`` refusing a job is
``Rejected``; anything else is a ``ClusterError`` with Slurm's words); what the partition offers
(GPUs per node, nodes, images, and the sandbox a job mounts drives in where images do not run
under pyxis: ``bwrap``, tried once on this host by ``reconciler.sandbox.find_node_sandbox``).

Must not touch: the records, the clock, restart decisions. Callers hold the records' lock.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Collection

from reconciler.sandbox import NodeSandbox, find_node_sandbox

from ..base import ClusterError, Rejected, Unreachable
from .decode import LIVE_SLURM_STATES, JobRow, parse_squeue
from .queue import SQUEUE_FIELDS, SQUEUE_TIME_FORMAT, parse_squeue_text
from .submission import Images

__all__ = ["COMMAND_TIMEOUT", "SlurmCommands"]

#: How long one Slurm command may take before the cluster counts as unreachable.
COMMAND_TIMEOUT = 30.0
#: squeue's times as epoch seconds (``queue.parse_squeue_text`` reads them so)
_EPOCH_TIMES = {"SLURM_TIME_FORMAT": SQUEUE_TIME_FORMAT}
#: The most names a ``squeue --name`` asks for: beyond, every job is read (squeue's filter costs
#: jobs × names: ``SlurmCommands.squeue_text``), and ``queue.Queue`` parses only the lines asked
#: for. 100 run names (at most 57 characters each) keep far under a command line's bound on one
#: argument (Linux's ``MAX_ARG_STRLEN``, 128 KiB: beyond, ``exec`` fails with E2BIG).
NAMES_AT_MOST = 100
#: Words on stderr that say the controller could not be reached.
_UNREACHABLE = ("Unable to contact slurm controller", "Connection refused", "Socket timed out")


class SlurmCommands:
    """The commands of one Slurm partition (``None``: the default one)."""

    def __init__(
        self, partition: str | None, *, timeout: float = COMMAND_TIMEOUT, images: Images | None = None
    ):
        self.partition = partition
        self.timeout = timeout
        self._images = images
        self._node_gpus: int | None = None
        self._asked_node_gpus = False
        self._node_sandbox: tuple[NodeSandbox | None, str] | None = None

    def run(
        self, argv: list[str], input: str | None = None, check: bool = True, env: dict[str, str] | None = None
    ) -> str:
        """Run a command (``env``: variables set for it beside this process's): its stdout
        (``check``: a non-zero exit is an error), else stdout and stderr together (the caller
        judges by what Slurm reports afterwards)."""
        try:
            proc = subprocess.run(
                argv,
                input=input,
                capture_output=True,
                text=True,
                timeout=self.timeout,
                check=False,
                env={**os.environ, **env} if env else None,
            )
        except FileNotFoundError as exc:
            raise Unreachable(f"{argv[0]} is not on the PATH: is this a Slurm submit host?") from exc
        except subprocess.TimeoutExpired as exc:
            raise Unreachable(f"{argv[0]} did not answer within {self.timeout:g} s") from exc
        err = (proc.stderr or "").strip()
        if any(s in err for s in _UNREACHABLE):
            raise Unreachable(f"Slurm's controller cannot be reached: {err.splitlines()[-1]}")
        if check and proc.returncode != 0:
            raise ClusterError(f"{' '.join(argv[:2])} failed: {err or proc.stdout.strip()}")
        return proc.stdout + proc.stderr if not check else proc.stdout

    def squeue(self, names: Collection[str] | None = None, *, job: int | None = None) -> list[JobRow]:
        """Every job of ``squeue_text(names, job=job)``, parsed."""
        return parse_squeue_text(self.squeue_text(names, job=job))

    def squeue_text(self, names: Collection[str] | None = None, *, job: int | None = None) -> str:
        """Every job the controller knows, in any state, the fields astra reads
        (``queue.SQUEUE_FIELDS``), as squeue writes them; with at most ``NAMES_AT_MOST`` names,
        only the jobs of those names (astra names each job after its run). The controller
        sends every job either way; squeue then looks each job up in the list of names, a
        cost of jobs × names: at 30,700 jobs, one name 0.16 s, 100 names 0.21 s, 300 names
        0.36 s, 1,000 names 0.91 s, every job unfiltered 0.25 s. With ``job``, that job's rows
        only (an array's: each copy's, and its waiting rest), which the controller looks up
        alone; a job it no longer knows gives none."""
        argv = ["squeue", "-h", "-t", "all", "-O", SQUEUE_FIELDS]
        if job is not None:
            argv += ["-j", str(job)]
        elif names and len(names) <= NAMES_AT_MOST:
            argv += ["--name", ",".join(sorted(names))]
        return self.run(argv, check=job is None, env=_EPOCH_TIMES)

    def squeue_json(self) -> list[JobRow]:
        """Every job the controller knows, from every field of its record (``squeue --json``):
        the reading the text form is held to (``tests/slurm/test_queue_text.py``)."""
        out = self.run(["squeue", "--json"])
        try:
            return parse_squeue(json.loads(out))
        except (ValueError, KeyError) as exc:
            raise ClusterError(f"squeue --json gave what astra cannot read: {exc}") from exc

    def sbatch(self, script: str, extra: list[str]) -> int:
        """Submit a batch script (``extra``: options beyond its ``#SBATCH`` lines); the job id."""
        try:
            out = self.run(["sbatch", "--parsable", *extra], input=script)
        except Unreachable:
            raise
        except ClusterError as exc:
            text = str(exc).removeprefix("sbatch --parsable failed: ")
            raise Rejected(f"Slurm refused the job: {text}") from exc
        m = re.match(r"\s*(\d+)", out)
        if m is None:
            raise ClusterError(f"sbatch gave no job id: {out.strip()}")
        return int(m.group(1))

    def scancel(self, job_ids: list[str], *, check: bool = True) -> None:
        self.run(["scancel", *job_ids], check=check)

    def signal(self, job_ids: list[str], signal: str) -> None:
        """The first half of a graceful stop: ``signal`` to every process of the running jobs
        (``--full``: the batch shell, its children and every step), the waiting ones cancelled."""
        if job_ids:
            self.run(["scancel", f"--signal={signal}", "--full", "--state=RUNNING", *job_ids], check=False)
            self.run(["scancel", "--state=PENDING", *job_ids], check=False)

    def live(self, job_ids: list[str]) -> list[str]:
        """Those of ``job_ids`` whose jobs (or any of an array's tasks) have not ended."""
        if not job_ids:
            return []
        out = self.run(
            ["squeue", "-h", "-t", "all", "-j", ",".join(job_ids), "-O", "ArrayJobID:|,JobID:|,State:"],
            check=False,
        )
        left: set[str] = set()
        for line in out.splitlines():
            cols = [c.strip() for c in line.split("|")]
            if len(cols) == 3 and cols[2] in LIVE_SLURM_STATES:
                left.update(c.split("_")[0] for c in cols[:2])
        return [j for j in job_ids if j.split("_")[0] in left]

    def update(self, job_id: int, setting: str) -> str:
        """``scontrol update JobId=… <setting>``; its words (it is judged by what squeue says next)."""
        return self.run(["scontrol", "update", f"JobId={job_id}", setting], check=False)

    def release(self, job_id: int) -> str:
        """``scontrol release``: a job submitted ``--hold`` may start; its words (judged by squeue)."""
        return self.run(["scontrol", "release", str(job_id)], check=False)

    def throttle(self, job_id: int, cap: int, comment: str) -> None:
        """An array's ``max_parallel`` in place (``ArrayTaskThrottle``), and its new comment."""
        # scontrol exits 1 when some tasks have ended ("Job has already finished") even though
        # the rest took the new throttle: judge by what squeue reports afterwards.
        # The array's own rows only (the controller looks up one job, not every job it keeps:
        # ``squeue --json`` of 27,000 jobs took 3.2 s here). The cap shows on the row of the
        # copies still waiting (``2-5%3``): none waiting, the cap has nothing left to hold.
        out = self.update(job_id, f"ArrayTaskThrottle={cap}")
        self.update(job_id, f"Comment={comment}")
        if any(r.array_max_tasks != cap for r in self.squeue(job=job_id) if r.array_task_string):
            raise ClusterError(f"Slurm did not change the array's throttle: {out.strip()}")

    def _partition_option(self) -> list[str]:
        return [f"--partition={self.partition}"] if self.partition else []

    def node_gpus(self) -> int | None:
        """The most GPUs one node of the partition has (``sinfo``), or None when it has none."""
        if not self._asked_node_gpus:
            best = 0
            for line in self.run(["sinfo", "-h", "-o", "%G", *self._partition_option()]).split():
                for gres in line.split(","):
                    m = re.match(r"gpu(?::[^:(]+)?:(\d+)", gres)
                    if m:
                        best = max(best, int(m.group(1)))
            self._node_gpus, self._asked_node_gpus = best or None, True
        return self._node_gpus

    def node_count(self) -> int | None:
        """How many nodes the partition has (``sinfo %D``), or None when sinfo does not say."""
        out = self.run(["sinfo", "-h", "-o", "%D", *self._partition_option()], check=False)
        counts = [int(x) for x in out.split() if x.isdigit()]
        return sum(counts) or None

    def images(self) -> Images:
        """How images are honoured: as configured, else ``pyxis`` when ``srun`` has ``--container-image``."""
        if self._images is None:
            help_text = self.run(["srun", "--help"], check=False)
            self._images = "pyxis" if "--container-image" in help_text else "host"
        return self._images

    def node_sandbox(self) -> tuple[NodeSandbox | None, str]:
        """The sandbox a job mounts drives in on its node (``bwrap``, found and tried once on this
        host, whose nodes are taken to have the same), or ``None`` and why not."""
        if self._node_sandbox is None:
            self._node_sandbox = find_node_sandbox()
        return self._node_sandbox
