"""From a run spec to one ``sbatch`` submission: the pure half of the Slurm cluster.

Owns: which spec fields Slurm carries and how (the table in ``docs/slurm.md``, row by row in
``tests/slurm/test_mapping.py``), the errors for fields it cannot carry (``FieldError`` with the
field's path, never a silent drop), the shape of a run on Slurm (array, one worker, gang), the
batch script with its wrapper (the environment of CONTRACT §6), and the spec hash the jobs carry.

Must not touch: processes, files, clocks. ``slurm.py`` runs what this module writes.

Shapes::

    kind     when                               Slurm                                     workers
    array    spec.array                         one sbatch --array=0-(N-1)%M              N, one per task
    single   one machine, one worker            one job, --nodes=1 --ntasks=1             1
    gang     several machines (start Gang)      one job, --nodes=K --ntasks-per-node=1,   K, one per node
                                                the workers started with srun
    hetjob   task_groups, start Gang, no        one heterogeneous job: a component per    sum of replicas
             start_after, at least 2 groups     group (#SBATCH hetjob), one srun over all
    groups   any other task_groups              one job per group (--ntasks=replicas);    sum of replicas
                                                start_after X: --dependency=after:<X's job>
"""

from __future__ import annotations

import hashlib
import json
import math
import shlex
from dataclasses import dataclass, field
from typing import Any, Literal

from reconciler.runspec.errors import FieldError
from reconciler.runspec.messages import GANG_BARRIER_SECONDS, MASTER_PORT
from reconciler.runspec.models import Run, TaskGroup, TaskTemplate, resolve_on_failure, resolve_start
from reconciler.runspec.paths import FieldPath

__all__ = [
    "COMMENT_MARKER",
    "GroupJob",
    "Images",
    "Kind",
    "Submission",
    "comment_for",
    "document_of",
    "gpu_shape",
    "group_gpus",
    "group_offsets",
    "group_order",
    "leader_file",
    "parse_comment",
    "spec_hash",
    "to_submission",
]

Kind = Literal["array", "single", "gang", "groups", "hetjob"]
#: How a worker's image is honoured: ``pyxis`` runs it with ``srun --container-image``; ``host``
#: runs the command on the node itself (a cluster without a container plugin, such as the local
#: test cluster). Chosen per cluster, never per run: see docs/slurm.md.
Images = Literal["pyxis", "host"]

#: Starts every ``--comment`` astra writes: ``astra/v1,spec=<hash>,sub=<nonce>`` (no spaces: it is
#: also an ``#SBATCH`` line).
COMMENT_MARKER = "astra/v1"

# ---- the words for what Slurm cannot carry ------------------------------------------------------
NO_INTERCONNECT = (
    "Slurm cannot choose machines by interconnect: remove network.interconnect "
    "(or run on an Astraeus cluster)"
)
NO_TOPOLOGY = (
    "this Slurm cluster has no network topology to keep a run within one {within}: "
    "remove topology.keep_within"
)
NO_MIN_MEMORY = (
    "Slurm cannot choose GPUs by their memory: remove gpu_requests.min_memory_gb "
    "(name the models with gpu_requests.models instead)"
)
NO_DRIVES = (
    "Slurm cannot mount drives: remove datavolume_refs and read the data from the cluster's shared filesystem"
)
NO_ENGINE = "Slurm cannot run a model engine: remove model.engine"
NO_PRIORITY = "astra cannot set a Slurm job's priority (only Slurm's administrators can): remove priority"
NO_MIN_AVAILABLE = (
    "Slurm starts all of a job's workers together: start MinAvailable cannot be carried; use Gang"
)
NO_INDEPENDENT_SPREAD = (
    "Slurm starts the workers of a multi-machine job together: use start Gang, or an array for "
    "independent workers"
)
NO_GANG_RESTART_TASK = (
    "a Slurm job restarts as a whole: use on_failure RestartJob (or FailJob) for a multi-machine run"
)
NO_GROUPS_MIN_AVAILABLE = (
    "Slurm starts a worker group's workers together: start MinAvailable cannot be carried for "
    "worker groups; use Gang (or Independent)"
)
NO_HETJOB_RESTART_TASK = (
    "a gang of worker groups is one heterogeneous Slurm job, which restarts as a whole: use "
    "on_failure RestartJob (or FailJob), or order the groups with start_after"
)
NO_HETJOB_NODES = (
    "a gang of {groups} worker groups is one heterogeneous Slurm job with a machine per group, "
    "and this partition has {nodes}: order the groups with start_after, or use fewer groups"
)
NO_GROUP_GPUS = "a group's worker runs on one machine and the largest machine has {node_gpus} GPUs"
NO_COMMAND = "on Slurm the command is what runs (an image's entrypoint is not read): give command"
NO_ARRAY_MACHINES = "an array copy runs on one machine on Slurm: machines must be 1 (or left out)"
NO_SHAPE = (
    "no shape fits: {count} GPUs cannot be split evenly over machines of at most {node_gpus} GPUs{at_least}"
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


def document_of(run: Run) -> dict[str, Any]:
    """The run as a plain document (what ``get_run`` gives back), server fields removed."""
    doc = run.model_dump(mode="json", exclude_none=True, by_alias=True)
    doc.get("metadata", {}).pop("resource_version", None)
    return doc


def gpu_shape(
    count: int, machines: int | None, min_per_machine: int | None, node_gpus: int | None
) -> tuple[int, int] | None:
    """``(machines, GPUs on each)`` for a run's GPUs: the fewest machines, split evenly.

    ``machines`` given: that many. Otherwise one machine if the count fits the largest node
    (or the node size is unknown), else the fewest machines that split the count evenly with at
    most ``node_gpus`` and at least ``min_per_machine`` on each. ``None`` if nothing fits.
    """
    if machines is not None:
        return machines, count // machines
    if node_gpus is None or count <= node_gpus:
        return 1, count
    floor = min_per_machine or 1
    for n in range(math.ceil(count / node_gpus), count + 1):
        if count % n == 0 and floor <= count // n <= node_gpus:
            return n, count // n
    return None


def _mib(n: int) -> int:
    return max(1, math.ceil(n / (1024 * 1024)))


def _unsupported(run: Run) -> list[FieldError]:
    """Every field of the run that Slurm cannot carry, each with its path."""
    spec, root = run.spec, FieldPath.root().child("spec")
    errors: list[FieldError] = []
    if spec.network is not None and spec.network.interconnect is not None:
        errors.append(FieldError.not_supported(root.child("network", "interconnect"), NO_INTERCONNECT))
    if spec.topology is not None and spec.topology.keep_within is not None:
        within = spec.topology.keep_within.replace("_", " ")
        errors.append(
            FieldError.not_supported(root.child("topology", "keep_within"), NO_TOPOLOGY.format(within=within))
        )
    if spec.model is not None and spec.model.engine is not None:
        errors.append(FieldError.not_supported(root.child("model", "engine"), NO_ENGINE))
    if spec.priority is not None:
        errors.append(FieldError.not_supported(root.child("priority"), NO_PRIORITY))
    for i, g in enumerate(spec.task_groups or ()):
        gpath = root.child("task_groups").index(i).child("task_template")
        errors.extend(_template_unsupported(g.task_template, gpath))
    if spec.task_template is not None:
        errors.extend(_template_unsupported(spec.task_template, root.child("task_template")))
    return errors


def _template_unsupported(t: TaskTemplate, path: FieldPath) -> list[FieldError]:
    errors: list[FieldError] = []
    if t.datavolume_refs:
        errors.append(FieldError.not_supported(path.child("datavolume_refs"), NO_DRIVES))
    if t.command is None:
        errors.append(FieldError.required(path.child("command"), NO_COMMAND))
    gr = t.requested_resources.gpu_requests if t.requested_resources else None
    if gr is not None and gr.min_memory_gb is not None:
        gpath = path.child("requested_resources", "gpu_requests", "min_memory_gb")
        errors.append(FieldError.not_supported(gpath, NO_MIN_MEMORY))
    return errors


def _gres(gpus: int, models: list[str] | None) -> tuple[str, list[str]]:
    """``gpu[:type]:n`` and any ``--constraint``: one model is a gres type, several a constraint."""
    if models and len(models) == 1:
        return f"gpu:{models[0]}:{gpus}", []
    if models:
        return f"gpu:{gpus}", ["--constraint=" + "|".join(models)]
    return f"gpu:{gpus}", []


def to_submission(
    run: Run,
    *,
    nonce: str,
    log_dir: str,
    partition: str | None = None,
    node_gpus: int | None = None,
    images: Images = "host",
    nodes_available: int | None = None,
    generation: str | None = None,
) -> Submission:
    """The ``sbatch`` for a run; ``errors`` lists every field Slurm cannot carry (then no script).

    A run with worker groups gives its jobs in ``Submission.jobs`` instead (``_group_submission``);
    ``nodes_available`` (the partition's node count) bounds a heterogeneous job, and
    ``generation`` names the leader file of the run's current generation of group jobs.
    """
    if run.spec.task_groups is not None:
        return _group_submission(
            run,
            nonce=nonce,
            log_dir=log_dir,
            partition=partition,
            node_gpus=node_gpus,
            images=images,
            nodes_available=nodes_available,
            generation=generation or nonce,
        )
    errors = _unsupported(run)
    spec = run.spec
    t = spec.task_template
    root = FieldPath.root().child("spec")
    res = t.requested_resources if t is not None else None
    gr = res.gpu_requests if res is not None else None
    rpath = root.child("task_template", "requested_resources")

    kind: Kind
    nodes, gpus_each = 1, (gr.count if gr else 0)
    if spec.array is not None:
        kind, size = "array", spec.array.size
        if res is not None and (res.machines or 1) > 1:
            errors.append(FieldError.not_supported(rpath.child("machines"), NO_ARRAY_MACHINES))
    else:
        if gr is not None:
            shape = gpu_shape(gr.count, res.machines if res else None, gr.min_per_machine, node_gpus)
            if shape is None:
                at_least = f" with at least {gr.min_per_machine} on each" if gr.min_per_machine else ""
                errors.append(
                    FieldError.invalid(
                        rpath.child("gpu_requests", "count"),
                        NO_SHAPE.format(count=gr.count, node_gpus=node_gpus, at_least=at_least),
                    )
                )
            else:
                nodes, gpus_each = shape
        elif res is not None and res.machines:
            nodes = res.machines
        kind = "gang" if nodes > 1 else "single"
        size = nodes
        if kind == "gang":
            start = resolve_start(spec, node_gpus)
            if start == "MinAvailable":
                errors.append(FieldError.not_supported(root.child("start"), NO_MIN_AVAILABLE))
            elif start == "Independent":
                errors.append(FieldError.not_supported(root.child("start"), NO_INDEPENDENT_SPREAD))
            elif resolve_on_failure(spec, start) == "RestartTask":
                errors.append(FieldError.not_supported(root.child("on_failure"), NO_GANG_RESTART_TASK))
        elif spec.start_policy == "MinAvailable":
            errors.append(FieldError.not_supported(root.child("start"), NO_MIN_AVAILABLE))

    comment = comment_for(run, nonce)
    if errors or t is None:
        return Submission(kind, size, nodes, gpus_each, (), "", comment, errors)

    name = run.metadata.name
    opts = [f"--job-name={name}", f"--comment={comment}"]
    if partition:
        opts.append(f"--partition={partition}")
    if kind == "array":
        assert spec.array is not None
        cap = spec.array.max_parallel or 0
        opts.append(f"--array=0-{size - 1}" + (f"%{cap}" if cap else ""))
        opts.append(f"--output={log_dir}/%A_%a.out")
    else:
        opts.append(f"--output={log_dir}/%j.out")
    if kind == "gang":
        opts += [f"--nodes={nodes}", "--ntasks-per-node=1"]
    else:
        opts += ["--nodes=1", "--ntasks=1"]
    if gr is not None:
        gres, constraint = _gres(gpus_each, gr.models)
        if kind == "gang":
            opts.append("--gpus-per-node=" + gres.removeprefix("gpu:"))
        else:
            opts.append(f"--gres={gres}")
        opts += constraint
    if res is not None:
        if res.cpu_cores is not None:
            opts.append(f"--cpus-per-task={res.cpu_cores}")
        if res.memory_bytes is not None:
            opts.append(f"--mem={_mib(res.memory_bytes)}M")
        if res.per_gpu is not None:
            if res.per_gpu.cpu_cores is not None:
                opts.append(f"--cpus-per-gpu={res.per_gpu.cpu_cores}")
            if res.per_gpu.memory_bytes is not None:
                opts.append(f"--mem-per-gpu={_mib(res.per_gpu.memory_bytes)}M")
    if t.time_limit_seconds is not None:
        # Slurm's time limits are whole minutes: a limit is rounded up.
        opts.append(f"--time={math.ceil(t.time_limit_seconds / 60)}")
    script = _script(run, kind, size, opts, log_dir, images)
    return Submission(kind, size, nodes, gpus_each, tuple(opts), script, comment)


def _script(run: Run, kind: Kind, size: int, opts: list[str], log_dir: str, images: Images) -> str:
    t = run.spec.task_template
    assert t is not None and t.command is not None
    argv = " ".join(shlex.quote(a) for a in [t.command, *(t.args or [])])
    doc = json.dumps(document_of(run), sort_keys=True, separators=(",", ":"))
    lines = ["#!/bin/bash"]
    lines += [f"#SBATCH {o}" for o in opts]
    lines += [
        f"# astra: run {run.metadata.name} ({kind}), submitted by astra; see docs/slurm.md.",
        f"# astra-document: {doc}",
        "",
    ]
    for key, value in sorted((t.env or {}).items()):
        lines.append(f"export {key}={shlex.quote(value)}")
    if kind == "array":
        # CONTRACT §6: the copy's index and the array's size under Astraeus' names; the copy is
        # rank <index> of <size>. SLURM_ARRAY_* are unset: the seeds say they are not set.
        lines += [
            'ASTRA_INDEX="$SLURM_ARRAY_TASK_ID"',
            f"export ASTRAEUS_ARRAY_TASK_ID=$ASTRA_INDEX ASTRAEUS_ARRAY_SIZE={size}",
            f"export ASTRAEUS_REPLICA_INDEX=$ASTRA_INDEX RANK=$ASTRA_INDEX WORLD_SIZE={size}",
            f"export SLURM_PROCID=$ASTRA_INDEX SLURM_NTASKS={size}",
            "unset ASTRA_INDEX ${!SLURM_ARRAY_@}",
        ]
    elif kind == "single":
        lines.append("export RANK=0 WORLD_SIZE=1 SLURM_PROCID=0 SLURM_NTASKS=1")
    else:
        # The leader is rank 0, on the job's first node; its address is the one Slurm uses.
        lines += [
            'ASTRA_LEADER=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)',
            'MASTER_ADDR=$(scontrol show node "$ASTRA_LEADER" -o'
            ' | sed -n "s/.* NodeAddr=\\([^ ]*\\).*/\\1/p")',
            f'export MASTER_ADDR="${{MASTER_ADDR:-$ASTRA_LEADER}}" MASTER_PORT={MASTER_PORT}',
            "unset ASTRA_LEADER",
        ]
    if kind == "gang":
        # srun sets each task's SLURM_PROCID/SLURM_NTASKS; RANK and WORLD_SIZE follow them.
        inner = "export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS"
        launch = f"srun --kill-on-bad-exit=1 --output={log_dir}/%j.%t.out"
    elif images == "pyxis":
        # srun would set SLURM_PROCID=0 SLURM_NTASKS=1 (and an array's SLURM_ARRAY_*) again.
        inner = "export SLURM_PROCID=$RANK SLURM_NTASKS=$WORLD_SIZE; unset ${!SLURM_ARRAY_@}"
        launch = "srun"
    else:
        lines.append(f"exec {argv}")
        return "\n".join(lines) + "\n"
    if images == "pyxis":
        launch += f" --container-image={shlex.quote(t.image)}"
    body = shlex.quote(inner + '; exec "$@"')
    lines.append(f"exec {launch} bash -c {body} astra-worker {argv}")
    return "\n".join(lines) + "\n"


# ---- worker groups ----------------------------------------------------------------------------


def group_order(groups: list[TaskGroup]) -> list[int]:
    """Group indices in submission order: each group after the one it starts after, else spec order."""
    names = {g.name: i for i, g in enumerate(groups)}
    out: list[int] = []
    done: set[int] = set()

    def visit(i: int, path: frozenset[int]) -> None:
        if i in done or i in path:  # a cycle is the spec's error, reported before we get here
            return
        after = groups[i].start_after
        if after is not None and after in names:
            visit(names[after], path | {i})
        done.add(i)
        out.append(i)

    for i in range(len(groups)):
        visit(i, frozenset())
    return out


def group_offsets(groups: list[TaskGroup]) -> list[int]:
    """Each group's first RANK: ranks run across the groups in spec order."""
    offsets, rank = [], 0
    for g in groups:
        offsets.append(rank)
        rank += g.replicas
    return offsets


def leader_file(log_dir: str, generation: str) -> str:
    """Where the leader's group writes MASTER_ADDR for the other groups (one file a generation)."""
    return f"{log_dir}/leader.{generation}"


def _group_options(
    run: Run, g: TaskGroup, comment: str, partition: str | None, log_dir: str, output: bool
) -> list[str]:
    """A group's job (or hetjob component): ``--ntasks=replicas``, the template's ask per task."""
    t = g.task_template
    opts = [f"--job-name={run.metadata.name}", f"--comment={comment}"]
    if partition:
        opts.append(f"--partition={partition}")
    if output:
        opts.append(f"--output={log_dir}/%j.out")
    opts.append(f"--ntasks={g.replicas}")
    res = t.requested_resources
    gr = res.gpu_requests if res is not None else None
    if gr is not None:
        gres, constraint = _gres(gr.count, gr.models)
        opts.append("--gpus-per-task=" + gres.removeprefix("gpu:"))
        opts += constraint
    if res is not None:
        if res.cpu_cores is not None:
            opts.append(f"--cpus-per-task={res.cpu_cores}")
        if res.memory_bytes is not None:
            # Slurm has no memory per task: per CPU, times the task's CPUs, is at least the ask.
            opts.append(f"--mem-per-cpu={math.ceil(_mib(res.memory_bytes) / (res.cpu_cores or 1))}M")
        if res.per_gpu is not None:
            if res.per_gpu.cpu_cores is not None:
                opts.append(f"--cpus-per-gpu={res.per_gpu.cpu_cores}")
            if res.per_gpu.memory_bytes is not None:
                opts.append(f"--mem-per-gpu={_mib(res.per_gpu.memory_bytes)}M")
    if t.time_limit_seconds is not None:
        opts.append(f"--time={math.ceil(t.time_limit_seconds / 60)}")
    return opts


def _group_inner(g: TaskGroup, rank: str, size: int) -> str:
    """The per-task wrapper of a group's worker: its env, then CONTRACT §6's names."""
    parts = [f"export {k}={shlex.quote(v)}" for k, v in sorted((g.task_template.env or {}).items())]
    parts.append(f"export RANK={rank} WORLD_SIZE={size}")
    parts.append("export SLURM_PROCID=$RANK SLURM_NTASKS=$WORLD_SIZE")
    return "; ".join(parts) + '; exec "$@"'


def _group_argv(g: TaskGroup) -> str:
    t = g.task_template
    assert t.command is not None
    return " ".join(shlex.quote(a) for a in [t.command, *(t.args or [])])


_FIRST_NODE_ADDR = [
    'ASTRA_LEADER=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)',
    'MASTER_ADDR=$(scontrol show node "$ASTRA_LEADER" -o | sed -n "s/.* NodeAddr=\\([^ ]*\\).*/\\1/p")',
    'MASTER_ADDR="${MASTER_ADDR:-$ASTRA_LEADER}"',
    "unset ASTRA_LEADER",
]


def _header(run: Run, what: str, blocks: list[list[str]]) -> list[str]:
    doc = json.dumps(document_of(run), sort_keys=True, separators=(",", ":"))
    lines = ["#!/bin/bash"]
    for i, opts in enumerate(blocks):
        if i:
            lines.append("#SBATCH hetjob")
        lines += [f"#SBATCH {o}" for o in opts]
    lines.append(f"# astra: run {run.metadata.name} ({what}), submitted by astra; see docs/slurm.md.")
    lines += [f"# astra-document: {doc}", ""]
    return lines


def _group_submission(
    run: Run,
    *,
    nonce: str,
    log_dir: str,
    partition: str | None,
    node_gpus: int | None,
    images: Images,
    nodes_available: int | None,
    generation: str,
) -> Submission:
    spec = run.spec
    groups = list(spec.task_groups or ())
    root = FieldPath.root().child("spec")
    errors = _unsupported(run)
    for i, g in enumerate(groups):
        res = g.task_template.requested_resources
        gr = res.gpu_requests if res is not None else None
        if gr is not None and node_gpus is not None and gr.count > node_gpus:
            path = root.child("task_groups").index(i).child("task_template", "requested_resources")
            errors.append(
                FieldError.invalid(
                    path.child("gpu_requests", "count"), NO_GROUP_GPUS.format(node_gpus=node_gpus)
                )
            )
    start = resolve_start(spec, node_gpus)
    ordered = any(g.start_after for g in groups)
    het = start == "Gang" and not ordered and len(groups) > 1
    if start == "MinAvailable":
        errors.append(FieldError.not_supported(root.child("start"), NO_GROUPS_MIN_AVAILABLE))
    elif het and resolve_on_failure(spec, start) == "RestartTask":
        errors.append(FieldError.not_supported(root.child("on_failure"), NO_HETJOB_RESTART_TASK))
    if het and nodes_available is not None and nodes_available < len(groups):
        errors.append(
            FieldError.not_supported(
                root.child("task_groups"), NO_HETJOB_NODES.format(groups=len(groups), nodes=nodes_available)
            )
        )
    size = sum(g.replicas for g in groups)
    kind: Kind = "hetjob" if het else "groups"
    comment = comment_for(run, nonce)
    gpus = max((_group_gpus(g) for g in groups), default=0)
    if errors:
        return Submission(kind, size, 1, gpus, (), "", comment, errors)
    offsets = group_offsets(groups)
    launch = f"srun --kill-on-bad-exit=1 --output={log_dir}/%j.%t.out"

    def image(g: TaskGroup) -> str:
        return f" --container-image={shlex.quote(g.task_template.image)}" if images == "pyxis" else ""

    if het:
        blocks = [_group_options(run, g, comment, partition, log_dir, i == 0) for i, g in enumerate(groups)]
        lines = _header(run, "hetjob: " + ", ".join(g.name for g in groups), blocks)
        # The batch step runs on component 0's first node: that is the leader (rank 0).
        lines += [*_FIRST_NODE_ADDR, f"export MASTER_ADDR MASTER_PORT={MASTER_PORT}"]
        # One heterogeneous step over every component: Slurm numbers its tasks across the
        # components in order (SLURM_PROCID 0..N-1, SLURM_NTASKS N), which is RANK across groups.
        steps = [
            f"--het-group={i} {launch.removeprefix('srun ')}{image(g)} bash -c "
            f"{shlex.quote(_group_inner(g, '$SLURM_PROCID', size))} astra-worker {_group_argv(g)}"
            for i, g in enumerate(groups)
        ]
        lines.append("exec srun " + " : ".join(steps))
        script = "\n".join(lines) + "\n"
        job = GroupJob(tuple(range(len(groups))), None, tuple(o for b in blocks for o in b), script)
        return Submission(kind, size, len(groups), gpus, job.options, script, comment, jobs=(job,))

    names = {g.name: i for i, g in enumerate(groups)}
    leader = shlex.quote(leader_file(log_dir, generation))
    jobs = []
    for i in group_order(groups):
        g = groups[i]
        opts = _group_options(run, g, comment, partition, log_dir, True)
        lines = _header(
            run, f"group {g.name}, ranks {offsets[i]}-{offsets[i] + g.replicas - 1} of {size}", [opts]
        )
        if size > 1:
            if i == 0:
                # The leader's group: its first node is rank 0's. It tells the other groups,
                # whose jobs may start before or after it, through a file in the shared log dir.
                lines += _FIRST_NODE_ADDR
                tmp = f"{leader}.$SLURM_JOB_ID"
                lines.append(f'printf "%s\\n" "$MASTER_ADDR" > {tmp} && mv -f {tmp} {leader}')
            else:
                lines += [
                    f"for _ in $(seq {GANG_BARRIER_SECONDS}); do [ -s {leader} ] && break; sleep 1; done",
                    f"MASTER_ADDR=$(cat {leader} 2>/dev/null)",
                    'if [ -z "$MASTER_ADDR" ]; then',
                    f"  echo \"astra: the leader's group {groups[0].name} did not start within "
                    f'{GANG_BARRIER_SECONDS // 60} minutes" >&2; exit 1',
                    "fi",
                ]
            lines.append(f"export MASTER_ADDR MASTER_PORT={MASTER_PORT}")
        inner = _group_inner(g, f"$(({offsets[i]}+SLURM_PROCID))", size)
        lines.append(f"exec {launch}{image(g)} bash -c {shlex.quote(inner)} astra-worker {_group_argv(g)}")
        after = names[g.start_after] if g.start_after is not None else None
        jobs.append(GroupJob((i,), after, tuple(opts), "\n".join(lines) + "\n"))
    return Submission(kind, size, 1, gpus, jobs[0].options, jobs[0].script, comment, jobs=tuple(jobs))


def _group_gpus(g: TaskGroup) -> int:
    res = g.task_template.requested_resources
    return res.gpu_requests.count if res is not None and res.gpu_requests is not None else 0


def group_gpus(run: Run) -> list[int]:
    """GPUs per worker of each group, in spec order."""
    return [_group_gpus(g) for g in run.spec.task_groups or ()]
