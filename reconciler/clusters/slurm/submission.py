"""What one ``sbatch`` is, and the pieces every submission shares: the pure core of the mapping.

Owns: the ``Submission`` and ``GroupJob`` records the mapping hands the cluster, the shapes
(``Kind``) and image modes (``Images``), the ``--comment`` astra writes on every job (its marker,
the spec hash, the submission's nonce) and how it is read back, the run's document as the
script's header carries it, and the resource options both mappings write alike (``--gres``,
memory in MiB, ``--time`` in whole minutes); and the words both write to call the secrets'
wrapper (``jobwrapper``: ``secret_wrapper``, ``task_exec``, ``secret_file_line``, pyxis'
``container_env``, ``no_requeue``).

Must not touch: processes, files, clocks; which fields Slurm cannot carry (``unsupported``);
the shapes' own options and scripts (``mapping`` for one worker template, ``groups`` for worker
groups).
"""

from __future__ import annotations

import hashlib
import json
import math
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, Literal

from reconciler.runspec.errors import FieldError
from reconciler.runspec.models import PerGpu, Run
from reconciler.sandbox import NODE_BOX

from .jobwrapper import carried
from .stopping import ATTEMPT_LINES, job_options

__all__ = [
    "COMMENT_MARKER",
    "LEADER_ADDRESS",
    "GroupJob",
    "Images",
    "Kind",
    "Submission",
    "ask_options",
    "comment_for",
    "comment_nonce",
    "container_env",
    "document_of",
    "gres",
    "mib",
    "no_requeue",
    "parse_comment",
    "per_gpu_options",
    "reads_secrets",
    "script_header",
    "secret_count",
    "secret_file_line",
    "secret_wrapper",
    "spec_hash",
    "step_launch",
    "task_exec",
    "time_option",
    "wrapper_path",
]

Kind = Literal["array", "single", "gang", "groups", "hetjob"]
#: How a worker's image is honoured: ``pyxis`` runs it with ``srun --container-image``; ``host``
#: runs the command on the node itself (a cluster without a container plugin, such as the local
#: test cluster). Chosen per cluster, never per run: see docs/slurm.md.
Images = Literal["pyxis", "host"]

#: Starts every ``--comment`` astra writes: ``astra/v1,spec=<hash>,sub=<nonce>`` (no spaces: it is
#: also an ``#SBATCH`` line).
COMMENT_MARKER = "astra/v1"

#: A job's first node, and its address as Slurm uses it, in ``ASTRA_LEADER`` and ``MASTER_ADDR``
#: (empty when the node has no NodeAddr: then the node's name is the address).
LEADER_ADDRESS = (
    'ASTRA_LEADER=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)',
    'MASTER_ADDR=$(scontrol show node "$ASTRA_LEADER" -o | sed -n "s/.* NodeAddr=\\([^ ]*\\).*/\\1/p")',
)


@dataclass(frozen=True)
class Submission:
    """One ``sbatch``: its options (also written as ``#SBATCH`` lines) and its batch script."""

    kind: Kind
    #: Workers: the array's size, or the machines of a gang, or 1.
    size: int
    nodes: int
    gpus_per_worker: int
    options: tuple[str, ...]
    script: str
    comment: str
    errors: list[FieldError] = field(default_factory=list)
    #: Worker groups (kinds ``groups`` and ``hetjob``): the jobs to submit, in submission order.
    jobs: tuple[GroupJob, ...] = ()


@dataclass(frozen=True)
class GroupJob:
    """One ``sbatch`` of a run with worker groups: one group, or every group as a hetjob."""

    #: The groups it carries, by their index in ``spec.task_groups``.
    groups: tuple[int, ...]
    #: ``start_after``: the index of the group whose job must have started first
    #: (``--dependency=after:<its job id>``, added at submission when that id is known).
    after: int | None
    options: tuple[str, ...]
    script: str


def spec_hash(run: Run) -> str:
    """A hash of the normalized spec: defaults filled by the model, quantities canonical."""
    spec = run.spec.model_dump(mode="json", exclude_none=True)
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def comment_for(run: Run, nonce: str) -> str:
    return f"{COMMENT_MARKER},spec={spec_hash(run)},sub={nonce}"


def parse_comment(comment: str | None) -> dict[str, str] | None:
    """``{"spec": …, "sub": …}`` from a comment astra wrote, ``None`` for any other comment."""
    if not comment or not comment.startswith(COMMENT_MARKER + ","):
        return None
    parts = dict(p.split("=", 1) for p in comment.split(",")[1:] if "=" in p)
    return parts if "spec" in parts and "sub" in parts else None


def comment_nonce(comment: str) -> str:
    """The submission's nonce (``sub=``) of a comment astra wrote."""
    mark = parse_comment(comment)
    assert mark is not None
    return mark["sub"]


def document_of(run: Run) -> dict[str, Any]:
    """The run as a plain document (what ``get_run`` gives back), server fields removed."""
    doc = run.model_dump(mode="json", exclude_none=True, by_alias=True)
    doc.get("metadata", {}).pop("resource_version", None)
    return doc


def script_header(run: Run, what: str, blocks: list[list[str]]) -> list[str]:
    """A batch script's first lines: the ``#SBATCH`` options (a ``hetjob`` line between the blocks
    of a heterogeneous job), a line saying what it is, and the run's document."""
    doc = json.dumps(document_of(run), sort_keys=True, separators=(",", ":"))
    lines = ["#!/bin/bash"]
    for i, opts in enumerate(blocks):
        if i:
            lines.append("#SBATCH hetjob")
        lines += [f"#SBATCH {o}" for o in opts]
    lines.append(f"# astra: run {run.metadata.name} ({what}), submitted by astra; see docs/slurm.md.")
    lines += [f"# astra-document: {doc}", "", *ATTEMPT_LINES]
    return lines


def reads_secrets(template: Any) -> bool:
    """Whether a worker template reads secrets (an env value ``{secret: NAME}``, secret files)."""
    return bool(template.secret_files) or any(not isinstance(v, str) for v in (template.env or {}).values())


def secret_count(template: Any) -> int:
    """How many values a worker template reads: its env secrets and its secret files."""
    env = sum(1 for v in (template.env or {}).values() if not isinstance(v, str))
    return env + len(template.secret_files or ())


def no_requeue(options: list[str]) -> list[str]:
    """A job that reads secrets is ``--no-requeue``: requeued, it would find its file gone
    (astra resubmits it instead, with a new one)."""
    return ["--no-requeue" if o == "--requeue" else o for o in options]


def secret_file_line(index: str) -> str:
    """The batch script's line that names its secrets file (``secrets.job_file``: copy or group
    job ``index``, a shell word) from the path ``--export`` gives (then unset: tasks need it not)."""
    return f'ASTRA_SECRET_FILE="$ASTRA_SECRETS.{index}"; unset ASTRA_SECRETS'


def task_exec(box: str | None, wrapper: str | None, command: str) -> str:
    """The ``exec`` that ends a worker's shell line: ``command`` under the secrets' ``wrapper``
    (``jobwrapper``: it takes the sandbox as ``--boxed``, to mount the files in it too) and in
    the node's drive sandbox (readied by ``box``, the line before it), either, both or neither."""
    words = ["exec", *([wrapper] if wrapper else []), *(["--boxed"] if wrapper and box else [])]
    return " ".join([*words, *([NODE_BOX] if box else []), command])


def secret_wrapper(log_dir: str, source: str) -> str:
    """The secrets' wrapper of a run's job with its ``source`` (``jobwrapper``'s first words)."""
    return f"python3 {shlex.quote(wrapper_path(log_dir))} {source}"


def container_env(template: Any, part: int) -> str:
    """Under pyxis: `` --container-env=NAMES`` of the variables that carry a template's secrets
    (``jobwrapper.carried``: names, never values), so that the image's own environment does not
    hide them, or nothing when it reads none."""
    count = secret_count(template)
    return f" --container-env={','.join(carried(part, count))}" if count else ""


def wrapper_path(log_dir: str) -> str:
    """The secrets' wrapper (``jobwrapper``) the cluster writes in its state folder, from a run's
    log folder (``STATE/logs/NAME``): ``STATE/bin/astra-job.py``."""
    return str(PurePath(log_dir).parent.parent / "bin" / "astra-job.py")


def mib(n: int) -> int:
    """Bytes as whole MiB, rounded up (at least 1): what ``--mem`` and its kin take."""
    return max(1, math.ceil(n / (1024 * 1024)))


def gres(gpus: int, models: list[str] | None) -> tuple[str, list[str]]:
    """``gpu[:type]:n`` and any ``--constraint``: one model is a gres type, several a constraint."""
    if models and len(models) == 1:
        return f"gpu:{models[0]}:{gpus}", []
    if models:
        return f"gpu:{gpus}", ["--constraint=" + "|".join(models)]
    return f"gpu:{gpus}", []


def per_gpu_options(per_gpu: PerGpu | None) -> list[str]:
    """``--cpus-per-gpu`` and ``--mem-per-gpu`` of a ``resources.per_gpu`` (either may be unset)."""
    if per_gpu is None:
        return []
    opts = []
    if per_gpu.cpu_cores is not None:
        opts.append(f"--cpus-per-gpu={per_gpu.cpu_cores}")
    if per_gpu.memory_bytes is not None:
        opts.append(f"--mem-per-gpu={mib(per_gpu.memory_bytes)}M")
    return opts


def ask_options(
    template: Any, gpus: int, gpu_option: Callable[[str], str], *, memory_per_cpu: bool = False
) -> list[str]:
    """The options of what one worker template asks, as both mappings write them: its GPUs
    (``gpu_option`` of the ``gres`` ask, ``gpus`` of them, and any ``--constraint``), its cores,
    its memory (``--mem``; ``memory_per_cpu``: ``--mem-per-cpu``, for a task, as Slurm has no
    memory per task: per CPU, times the task's CPUs, is at least the ask), ``per_gpu``,
    ``--time``, and how it is stopped (``stopping.job_options``)."""
    res = template.requested_resources
    gr = res.gpu_requests if res is not None else None
    opts: list[str] = []
    if gr is not None:
        ask, constraint = gres(gpus, gr.models)
        opts.append(gpu_option(ask))
        opts += constraint
    if res is not None:
        if res.cpu_cores is not None:
            opts.append(f"--cpus-per-task={res.cpu_cores}")
        if res.memory_bytes is not None and memory_per_cpu:
            opts.append(f"--mem-per-cpu={math.ceil(mib(res.memory_bytes) / (res.cpu_cores or 1))}M")
        elif res.memory_bytes is not None:
            opts.append(f"--mem={mib(res.memory_bytes)}M")
        opts += per_gpu_options(res.per_gpu)
    if template.time_limit_seconds is not None:
        opts.append(time_option(template.time_limit_seconds))
    return opts + job_options(template)


def time_option(seconds: int) -> str:
    """``--time``: Slurm's time limits are whole minutes, so a limit is rounded up."""
    return f"--time={math.ceil(seconds / 60)}"


def step_launch(log_dir: str) -> str:
    """The ``srun`` that starts a multi-worker job's workers, each writing its own log."""
    return f"srun --kill-on-bad-exit=1 --output={log_dir}/%j.%t.out"
