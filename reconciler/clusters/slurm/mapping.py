"""From a run spec to ``sbatch``: which fields Slurm carries and how, the pure half of the cluster.

Owns: the shape of a run on Slurm (the table below), the options and the batch script of a run
of one worker template (its wrapper sets the environment of CONTRACT §6 and mounts the drives,
``drives``' way), the errors for what a
shape cannot carry (``FieldError`` with the field's path, never a silent drop; the words are
``unsupported``'s), and which changes a submitted job can take in place (``SLURM_IN_PLACE``,
``update_errors``). The table is ``docs/slurm.md``'s, row by row in ``tests/slurm/test_mapping.py``.

Must not touch: processes, files, clocks. ``cluster`` runs what this module writes; worker groups
are ``groups``'; the comment, the spec hash and the ``Submission`` record are ``submission``'s.

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

import math
import shlex
from pathlib import PurePath
from typing import Any

from reconciler.runspec.errors import FieldError
from reconciler.runspec.messages import MASTER_PORT
from reconciler.runspec.models import Run, Spec, resolve_on_failure, resolve_start
from reconciler.runspec.paths import FieldPath
from reconciler.runspec.rerun import array_map
from reconciler.runspec.vocabulary import changed_paths, forces_replace, validate_update
from reconciler.sandbox import Mount

from .drives import SlurmDrives, box_line, container_mounts, template_mounts
from .groups import group_submission
from .submission import (
    LEADER_ADDRESS,
    Images,
    Kind,
    Submission,
    ask_options,
    comment_for,
    container_env,
    no_requeue,
    reads_secrets,
    script_header,
    secret_file_line,
    secret_wrapper,
    step_launch,
    task_exec,
    wrapper_path,
)
from .unsupported import (
    NO_ARRAY_MACHINES,
    NO_GANG_RESTART_TASK,
    NO_INDEPENDENT_SPREAD,
    NO_MIN_AVAILABLE,
    NO_SHAPE,
    unsupported,
)

__all__ = [
    "SLURM_IN_PLACE",
    "gpu_shape",
    "replace_message",
    "to_submission",
    "update_errors",
]

#: Of the fields the spec lets change in place, the ones a submitted Slurm job can take
#: (``scontrol update ArrayTaskThrottle``); metadata is astra's own record.
SLURM_IN_PLACE = (("spec", "array", "max_parallel"),)


def replace_message(path: str) -> str:
    return f"Slurm cannot change {path} of a submitted job: replace the run (delete it and create it again)"


def update_errors(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """The errors (as JSON) of changing normalised run ``old`` into ``new`` on Slurm: the spec's
    (``validate_update``), then each field the spec lets change in place but a submitted job
    cannot take (any but ``SLURM_IN_PLACE``)."""
    errors = [e.to_json() for e in validate_update(old, new)]
    errors += [
        {"path": str(p), "message": replace_message(str(p))}
        for p in changed_paths(old, new)
        if not forces_replace(p.steps) and p.steps[0] == "spec" and p.steps not in SLURM_IN_PLACE
    ]
    return errors


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
    drives: SlurmDrives | None = None,
) -> Submission:
    """The ``sbatch`` for a run; ``errors`` lists every field Slurm cannot carry (then no script).

    A run with worker groups gives its jobs in ``Submission.jobs`` instead (``group_submission``);
    ``nodes_available`` (the partition's node count) bounds a heterogeneous job, and
    ``generation`` names the leader file of the run's current generation of group jobs.
    ``drives``: what the cluster knows of drives (none: a run with drives is refused); a run
    without drives is mapped the same whatever it says.
    """
    known = drives if drives is not None else SlurmDrives()
    if run.spec.task_groups is not None:
        return group_submission(
            run,
            nonce=nonce,
            log_dir=log_dir,
            partition=partition,
            node_gpus=node_gpus,
            images=images,
            nodes_available=nodes_available,
            generation=generation or nonce,
            drives=known,
        )
    kind, nodes, gpus_each, errors = _shape(run, node_gpus, known, images)
    size = run.spec.array.size if run.spec.array is not None else nodes
    comment = comment_for(run, nonce)
    if errors or run.spec.task_template is None:
        return Submission(kind, size, nodes, gpus_each, (), "", comment, errors)
    opts = _options(run, kind, size, nodes, gpus_each, comment, partition, log_dir)
    script = _script(run, kind, size, opts, log_dir, images, known)
    return Submission(kind, size, nodes, gpus_each, tuple(opts), script, comment)


def _shape(
    run: Run, node_gpus: int | None, drives: SlurmDrives, images: Images
) -> tuple[Kind, int, int, list[FieldError]]:
    """``(kind, machines, GPUs of each worker, errors)`` of a run of one worker template."""
    errors = unsupported(run, drives, images)
    spec = run.spec
    t = spec.task_template
    res = t.requested_resources if t is not None else None
    gr = res.gpu_requests if res is not None else None
    rpath = FieldPath.root().child("spec", "task_template", "requested_resources")
    nodes, gpus_each = 1, (gr.count if gr else 0)
    if spec.array is not None:
        if res is not None and (res.machines or 1) > 1:
            errors.append(FieldError.not_supported(rpath.child("machines"), NO_ARRAY_MACHINES))
        return "array", nodes, gpus_each, errors
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
    kind: Kind = "gang" if nodes > 1 else "single"
    return kind, nodes, gpus_each, errors + _start_errors(spec, kind, node_gpus)


def _start_errors(spec: Spec, kind: Kind, node_gpus: int | None) -> list[FieldError]:
    """A start policy (or on_failure) that a job of this shape cannot carry."""
    root = FieldPath.root().child("spec")
    if kind != "gang":
        if spec.start_policy == "MinAvailable":
            return [FieldError.not_supported(root.child("start"), NO_MIN_AVAILABLE)]
        return []
    start = resolve_start(spec, node_gpus)
    if start == "MinAvailable":
        return [FieldError.not_supported(root.child("start"), NO_MIN_AVAILABLE)]
    if start == "Independent":
        return [FieldError.not_supported(root.child("start"), NO_INDEPENDENT_SPREAD)]
    if resolve_on_failure(spec, start) == "RestartTask":
        return [FieldError.not_supported(root.child("on_failure"), NO_GANG_RESTART_TASK)]
    return []


def _options(
    run: Run,
    kind: Kind,
    size: int,
    nodes: int,
    gpus_each: int,
    comment: str,
    partition: str | None,
    log_dir: str,
) -> list[str]:
    """The ``sbatch`` options of a run of one worker template."""
    spec = run.spec
    t = spec.task_template
    assert t is not None
    opts = [f"--job-name={run.metadata.name}", f"--comment={comment}"]
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

    def gpu_option(ask: str) -> str:
        return ("--gpus-per-node=" + ask.removeprefix("gpu:")) if kind == "gang" else f"--gres={ask}"

    opts += ask_options(t, gpus_each, gpu_option)
    return no_requeue(opts) if reads_secrets(t) else opts


def _script(
    run: Run, kind: Kind, size: int, opts: list[str], log_dir: str, images: Images, drives: SlurmDrives
) -> str:
    """The batch script of a run of one worker template: its env, CONTRACT §6's names, the
    command (with drives: in the node's sandbox, or with pyxis' container mounts).

    Over 60 lines: the batch script's lines in the order the job runs them, each a few lines, so that
    the script reads as the job does."""
    t = run.spec.task_template
    assert t is not None and t.command is not None
    argv = " ".join(shlex.quote(a) for a in [t.command, *(t.args or [])])
    mounts = template_mounts(t, drives)
    box = box_line(mounts, drives) if images != "pyxis" else None
    lines = script_header(run, kind, [opts])
    secret = reads_secrets(t)
    if secret:  # this copy's secrets file (``secrets.job_file``), named before the unset below
        lines.append(secret_file_line("${SLURM_ARRAY_TASK_ID:-0}"))
    for key, value in sorted((t.env or {}).items()):
        if isinstance(value, str):  # a secret's: the wrapper's (``jobwrapper``)
            lines.append(f"export {key}={shlex.quote(value)}")
    if kind == "array":
        # CONTRACT §6: the copy's index and the array's size under Astraeus' names; the copy is
        # rank <index> of <size>. SLURM_ARRAY_* are unset: the seeds say they are not set.
        # A rerun's copy (runspec.rerun): the original index and size, from the map it carries.
        mapped = array_map(run.metadata.annotations)
        index = 'ASTRA_INDEX="$SLURM_ARRAY_TASK_ID"'
        if mapped is not None:
            size = mapped.size
            index = f"ASTRA_MAP=({' '.join(map(str, mapped.indices))}); " + (
                'ASTRA_INDEX="${ASTRA_MAP[$SLURM_ARRAY_TASK_ID]}"; unset ASTRA_MAP'
            )
        lines += [
            index,
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
            *LEADER_ADDRESS,
            f'export MASTER_ADDR="${{MASTER_ADDR:-$ASTRA_LEADER}}" MASTER_PORT={MASTER_PORT}',
            "unset ASTRA_LEADER",
        ]
    if kind == "gang":
        # srun sets each task's SLURM_PROCID/SLURM_NTASKS; RANK and WORLD_SIZE follow them.
        inner = "export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS"
        launch = step_launch(log_dir)
    elif images == "pyxis":
        # srun would set SLURM_PROCID=0 SLURM_NTASKS=1 (and an array's SLURM_ARRAY_*) again.
        inner = "export SLURM_PROCID=$RANK SLURM_NTASKS=$WORLD_SIZE; unset ${!SLURM_ARRAY_@}"
        launch = "srun"
    else:
        # The command runs in the batch step itself: in the node's sandbox when it has drives,
        # under the secrets' wrapper when it reads secrets (``jobwrapper``: it masks the output).
        wrapper = secret_wrapper(log_dir, '"$ASTRA_SECRET_FILE"') if secret else None
        lines += [*([box] if box else []), task_exec(box, wrapper, argv)]
        return "\n".join(lines) + "\n"
    if images == "pyxis":  # the wrapper runs in the container: its folder mounted (read-only)
        bin_dir = str(PurePath(wrapper_path(log_dir)).parent)
        seen = [*mounts, Mount(bin_dir, bin_dir, True)] if secret else mounts
        launch += f" --container-image={shlex.quote(t.image)}{container_mounts(seen)}"
        launch += container_env(t, 0)
    # With secrets the batch step's wrapper reads the file and hands the values to srun's
    # tasks in its environment (``--carry``); each task's wrapper takes them (``--task``).
    tail = task_exec(box, secret_wrapper(log_dir, "--task 0") if secret else None, '"$@"')
    tail = f"{box}; {tail}" if box else tail
    carry = secret_wrapper(log_dir, '--carry "$ASTRA_SECRET_FILE" ') if secret else ""
    lines.append(f"exec {carry}{launch} bash -c {shlex.quote(inner + '; ' + tail)} astra-worker {argv}")
    return "\n".join(lines) + "\n"
