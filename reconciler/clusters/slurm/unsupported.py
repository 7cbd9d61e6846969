"""What Slurm cannot carry, in words that say what to do instead: the refusals of the mapping.

Owns: the exact words of every field (or combination) a Slurm cluster cannot carry, and the
checks of the fields that need no shape to judge (``unsupported``): each a ``FieldError`` with
the field's path, never a silent drop. Drives are judged against what the cluster knows
(``drives.SlurmDrives``): a drive not in its table, or no way to mount one (no pyxis, no
sandbox). The checks that depend on the shape (a gang's start policy, a group's GPUs on the
largest node) are the mappings' own, with these words.

Must not touch: processes, files, clocks; the spec's own rules (a run that reaches here is valid).
"""

from __future__ import annotations

from reconciler.runspec.errors import FieldError
from reconciler.runspec.models import Run, TaskTemplate
from reconciler.runspec.paths import FieldPath

from .drives import PYXIS_UNSAFE, SlurmDrives
from .submission import Images

__all__ = [
    "NO_ARRAY_MACHINES",
    "NO_COMMAND",
    "NO_DRIVE",
    "NO_DRIVES",
    "NO_ENGINE",
    "NO_GANG_RESTART_TASK",
    "NO_GROUPS_MIN_AVAILABLE",
    "NO_GROUP_GPUS",
    "NO_HETJOB_NODES",
    "NO_HETJOB_RESTART_TASK",
    "NO_INDEPENDENT_SPREAD",
    "NO_INTERCONNECT",
    "NO_MAX_PROCESSES",
    "NO_MIN_AVAILABLE",
    "NO_MIN_MEMORY",
    "NO_PRIORITY",
    "NO_PYXIS_PATH",
    "NO_SCHEDULE",
    "NO_SECRET_FILES",
    "NO_SECRET_FILES_PYXIS",
    "NO_SHAPE",
    "NO_TOPOLOGY",
    "secret_errors",
    "unsupported",
]

NO_SCHEDULE = (
    "a Slurm cluster does not make runs on a schedule: remove spec.schedule (or run it on an "
    "Astraeus cluster, whose server keeps the schedule)"
)
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
    "this Slurm cluster cannot mount drives: it has no pyxis (srun --container-mounts) and no sandbox "
    "({why}): install bubblewrap on its machines, or remove datavolume_refs and read the data from "
    "the cluster's shared filesystem"
)
NO_DRIVE = (
    "drive {name!r} is not known to this Slurm cluster: add it with "
    "astra drive create {name} --path FOLDER --server slurm://"
)
NO_PYXIS_PATH = "pyxis' --container-mounts cannot carry ':' or ',' in a path: {path!r}"
NO_ENGINE = "Slurm cannot run a model engine: remove model.engine"
NO_MAX_PROCESSES = (
    "a Slurm job's processes are bounded by the cluster's cgroup.conf, not by astra: remove max_processes"
)
NO_SECRET_FILES_PYXIS = (
    "astra does not carry secret files into pyxis containers yet: give the secret in env "
    "(env: {VAR: {secret: NAME}})"
)
NO_SECRET_FILES = (
    "secret files need a sandbox on Slurm's nodes ({why}): install bubblewrap, or give the secret "
    "in env instead"
)
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


def unsupported(run: Run, drives: SlurmDrives | None = None, images: Images = "host") -> list[FieldError]:
    """Every field of the run that Slurm cannot carry whatever its shape, each with its path;
    ``drives``: what the cluster knows of them (none: no drive, no sandbox), ``images``: how
    its images run (``pyxis`` mounts drives with ``--container-mounts``)."""
    known = drives if drives is not None else SlurmDrives()
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
    if spec.schedule is not None:
        errors.append(FieldError.not_supported(root.child("schedule"), NO_SCHEDULE))
    for i, g in enumerate(spec.task_groups or ()):
        gpath = root.child("task_groups").index(i).child("task_template")
        errors.extend(_template_unsupported(g.task_template, gpath, known, images))
        errors.extend(secret_errors(g.task_template, gpath, known, images))
    if spec.task_template is not None:
        tpath = root.child("task_template")
        errors.extend(_template_unsupported(spec.task_template, tpath, known, images))
        errors.extend(secret_errors(spec.task_template, tpath, known, images))
    return errors


def secret_errors(t: TaskTemplate, path: FieldPath, drives: SlurmDrives, images: Images) -> list[FieldError]:
    """The secrets of a template that its job cannot be given: env secrets reach every shape
    (``jobwrapper``); secret files need the node's sandbox, and are not carried into a pyxis
    container."""
    if not t.secret_files:
        return []
    if images == "pyxis":
        return [FieldError.not_supported(path.child("secret_files"), NO_SECRET_FILES_PYXIS)]
    if drives.sandbox is None:
        why = drives.no_sandbox or "bubblewrap was not found"
        return [FieldError.not_supported(path.child("secret_files"), NO_SECRET_FILES.format(why=why))]
    return []


def _template_unsupported(
    t: TaskTemplate, path: FieldPath, drives: SlurmDrives, images: Images
) -> list[FieldError]:
    errors = _drive_errors(t, path.child("datavolume_refs"), drives, images)
    if t.command is None:
        errors.append(FieldError.required(path.child("command"), NO_COMMAND))
    if t.max_processes is not None:
        errors.append(FieldError.not_supported(path.child("max_processes"), NO_MAX_PROCESSES))
    gr = t.requested_resources.gpu_requests if t.requested_resources else None
    if gr is not None and gr.min_memory_gb is not None:
        gpath = path.child("requested_resources", "gpu_requests", "min_memory_gb")
        errors.append(FieldError.not_supported(gpath, NO_MIN_MEMORY))
    return errors


def _drive_errors(t: TaskTemplate, path: FieldPath, drives: SlurmDrives, images: Images) -> list[FieldError]:
    """A template's drives that this cluster cannot mount: all of them when it has no way to
    (no pyxis, no sandbox: adding a drive would not help), else each one it does not know (and,
    under pyxis, a path that ``--container-mounts`` cannot carry)."""
    if not t.datavolume_refs:
        return []
    if images != "pyxis" and drives.sandbox is None:
        return [FieldError.not_supported(path, NO_DRIVES.format(why=drives.no_sandbox))]
    errors: list[FieldError] = []
    for i, ref in enumerate(t.datavolume_refs):
        folder = drives.folders.get(ref.name)
        if folder is None:
            errors.append(
                FieldError.not_supported(path.index(i).child("name"), NO_DRIVE.format(name=ref.name))
            )
            continue
        if images != "pyxis":
            continue
        for at, where in (("name", folder), ("mount_path", ref.mount_path)):
            if PYXIS_UNSAFE & set(where):
                errors.append(
                    FieldError.not_supported(path.index(i).child(at), NO_PYXIS_PATH.format(path=where))
                )
    return errors
