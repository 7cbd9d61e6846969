"""A run with worker groups on Slurm: its jobs, in the order they are submitted.

Owns: the two shapes of worker groups (``submission``'s table): a gang of groups is one
heterogeneous job (a component per group, one ``srun`` over all, ranks across the components);
any other is one job per group, submitted in ``start_after`` order with ``--dependency=after``,
the leader's group telling the others its address through a file in the shared log folder
(one file a generation). Also the groups' order, their first ranks and their GPUs, and how a
group's job carries secrets: its batch step's wrapper hands them to the tasks (``--carry``),
each group's tasks take their own part (``--task PART``: a heterogeneous job's one file has a
part per group) or, reading none, shed the others' (``SHED``).

Must not touch: processes, files, clocks. The cluster submits these jobs (``submit``).
"""

from __future__ import annotations

import shlex
from pathlib import PurePath

from reconciler.runspec.errors import FieldError
from reconciler.runspec.messages import GANG_BARRIER_SECONDS, MASTER_PORT
from reconciler.runspec.models import Run, StartPolicy, TaskGroup, resolve_on_failure, resolve_start
from reconciler.runspec.paths import FieldPath
from reconciler.sandbox import Mount

from .drives import SlurmDrives, box_line, container_mounts, template_mounts
from .submission import (
    LEADER_ADDRESS,
    GroupJob,
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
    NO_GROUP_GPUS,
    NO_GROUPS_MIN_AVAILABLE,
    NO_HETJOB_NODES,
    NO_HETJOB_RESTART_TASK,
    unsupported,
)

__all__ = [
    "group_gpus",
    "group_offsets",
    "group_order",
    "group_submission",
    "leader_file",
]

_FIRST_NODE_ADDR = [*LEADER_ADDRESS, 'MASTER_ADDR="${MASTER_ADDR:-$ASTRA_LEADER}"', "unset ASTRA_LEADER"]


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


def _group_gpus(g: TaskGroup) -> int:
    res = g.task_template.requested_resources
    return res.gpu_requests.count if res is not None and res.gpu_requests is not None else 0


def group_gpus(run: Run) -> list[int]:
    """GPUs per worker of each group, in spec order."""
    return [_group_gpus(g) for g in run.spec.task_groups or ()]


def group_submission(
    run: Run,
    *,
    nonce: str,
    log_dir: str,
    partition: str | None,
    node_gpus: int | None,
    images: Images,
    nodes_available: int | None,
    generation: str,
    drives: SlurmDrives,
) -> Submission:
    """The jobs of a run with worker groups (``Submission.jobs``); ``errors`` when Slurm cannot
    carry it. ``nodes_available`` bounds a heterogeneous job; ``generation`` names the leader
    file; ``drives``: what the cluster knows of them (each group mounts its template's)."""
    spec = run.spec
    groups = list(spec.task_groups or ())
    start = resolve_start(spec, node_gpus)
    het = start == "Gang" and not any(g.start_after for g in groups) and len(groups) > 1
    errors = _group_errors(run, start, node_gpus, nodes_available, het=het, drives=drives, images=images)
    size = sum(g.replicas for g in groups)
    kind: Kind = "hetjob" if het else "groups"
    comment = comment_for(run, nonce)
    gpus = max((_group_gpus(g) for g in groups), default=0)
    if errors:
        return Submission(kind, size, 1, gpus, (), "", comment, errors)
    if het:
        job = _hetjob(run, comment, partition, log_dir, images, drives)
        return Submission(kind, size, len(groups), gpus, job.options, job.script, comment, jobs=(job,))
    jobs = _group_jobs(run, comment, partition, log_dir, images, generation, drives)
    return Submission(kind, size, 1, gpus, jobs[0].options, jobs[0].script, comment, jobs=jobs)


def _group_errors(
    run: Run,
    start: StartPolicy,
    node_gpus: int | None,
    nodes_available: int | None,
    *,
    het: bool,
    drives: SlurmDrives,
    images: Images,
) -> list[FieldError]:
    """Every field of a run with worker groups that Slurm cannot carry (``start``: as resolved)."""
    spec = run.spec
    groups = list(spec.task_groups or ())
    root = FieldPath.root().child("spec")
    errors = unsupported(run, drives, images)
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
    return errors


def _image(g: TaskGroup, images: Images, drives: SlurmDrives, log_dir: str, part: int) -> str:
    """A group's ``--container-image`` under pyxis, with its drives' ``--container-mounts``
    (and, when it reads secrets, the wrapper's folder and the names of ``--container-env``)."""
    if images != "pyxis":
        return ""
    t = g.task_template
    mounts = template_mounts(t, drives)
    if reads_secrets(t):
        bin_dir = str(PurePath(wrapper_path(log_dir)).parent)
        mounts.append(Mount(bin_dir, bin_dir, True))
    env = container_env(t, part) if reads_secrets(t) else ""
    return f" --container-image={shlex.quote(t.image)}{container_mounts(mounts)}{env}"


def _box(g: TaskGroup, images: Images, drives: SlurmDrives) -> str | None:
    """The node sandbox's line for a group's drives, when its command runs on the node (no pyxis)."""
    return None if images == "pyxis" else box_line(template_mounts(g.task_template, drives), drives)


def _hetjob(
    run: Run, comment: str, partition: str | None, log_dir: str, images: Images, drives: SlurmDrives
) -> GroupJob:
    """A gang of groups: one heterogeneous job, a component per group."""
    groups = list(run.spec.task_groups or ())
    size = sum(g.replicas for g in groups)
    secret = any(reads_secrets(g.task_template) for g in groups)
    blocks = [_group_options(run, g, comment, partition, log_dir, i == 0) for i, g in enumerate(groups)]
    if secret:  # one job: none of its components is requeued (``no_requeue``)
        blocks = [no_requeue(b) for b in blocks]
    lines = script_header(run, "hetjob: " + ", ".join(g.name for g in groups), blocks)
    # The batch step runs on component 0's first node: that is the leader (rank 0).
    lines += [*_FIRST_NODE_ADDR, f"export MASTER_ADDR MASTER_PORT={MASTER_PORT}"]
    if secret:  # one file for the job, a part per group (``secrets.job_file``)
        lines.append(secret_file_line("0"))
    # One heterogeneous step over every component: Slurm numbers its tasks across the
    # components in order (SLURM_PROCID 0..N-1, SLURM_NTASKS N), which is RANK across groups.
    steps = [_het_step(g, i, size, log_dir, images, drives, carried=secret) for i, g in enumerate(groups)]
    lines.append(f"exec {_carry(log_dir, secret)}srun " + " : ".join(steps))
    options = tuple(o for b in blocks for o in b)
    return GroupJob(tuple(range(len(groups))), None, options, "\n".join(lines) + "\n")


def _group_jobs(
    run: Run,
    comment: str,
    partition: str | None,
    log_dir: str,
    images: Images,
    generation: str,
    drives: SlurmDrives,
) -> tuple[GroupJob, ...]:
    """One job per group, in submission order; each after the job of the group it starts after."""
    groups = list(run.spec.task_groups or ())
    size = sum(g.replicas for g in groups)
    offsets = group_offsets(groups)
    names = {g.name: i for i, g in enumerate(groups)}
    leader = shlex.quote(leader_file(log_dir, generation))
    jobs = []
    for i in group_order(groups):
        g = groups[i]
        secret = reads_secrets(g.task_template)
        opts = _group_options(run, g, comment, partition, log_dir, True)
        opts = no_requeue(opts) if secret else opts
        lines = script_header(
            run, f"group {g.name}, ranks {offsets[i]}-{offsets[i] + g.replicas - 1} of {size}", [opts]
        )
        if size > 1:
            lines += _leader_lines(i, groups[0].name, leader)
        if secret:  # this group's job's file (``secrets.job_file``: named by the group's index)
            lines.append(secret_file_line(str(i)))
        task = _task(g, log_dir, 0, secret)
        inner = _group_inner(g, f"$(({offsets[i]}+SLURM_PROCID))", size, _box(g, images, drives), task)
        launch = f"{_carry(log_dir, secret)}{step_launch(log_dir)}{_image(g, images, drives, log_dir, 0)}"
        lines.append(f"exec {launch} bash -c {shlex.quote(inner)} astra-worker {_group_argv(g)}")
        after = names[g.start_after] if g.start_after is not None else None
        jobs.append(GroupJob((i,), after, tuple(opts), "\n".join(lines) + "\n"))
    return tuple(jobs)


def _leader_lines(i: int, leader_group: str, leader: str) -> list[str]:
    """How group ``i``'s job learns MASTER_ADDR: the leader's group writes it, the others wait for it."""
    if i == 0:
        # The leader's group: its first node is rank 0's. It tells the other groups, whose jobs
        # may start before or after it, through a file in the shared log dir.
        tmp = f"{leader}.$SLURM_JOB_ID"
        lines = [*_FIRST_NODE_ADDR, f'printf "%s\\n" "$MASTER_ADDR" > {tmp} && mv -f {tmp} {leader}']
    else:
        lines = [
            f"for _ in $(seq {GANG_BARRIER_SECONDS}); do [ -s {leader} ] && break; sleep 1; done",
            f"MASTER_ADDR=$(cat {leader} 2>/dev/null)",
            'if [ -z "$MASTER_ADDR" ]; then',
            f"  echo \"astra: the leader's group {leader_group} did not start within "
            f'{GANG_BARRIER_SECONDS // 60} minutes" >&2; exit 1',
            "fi",
        ]
    return [*lines, f"export MASTER_ADDR MASTER_PORT={MASTER_PORT}"]


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
    gpus = res.gpu_requests.count if res is not None and res.gpu_requests is not None else 0
    return opts + ask_options(
        t, gpus, lambda ask: "--gpus-per-task=" + ask.removeprefix("gpu:"), memory_per_cpu=True
    )


def _het_step(
    g: TaskGroup, i: int, size: int, log_dir: str, images: Images, drives: SlurmDrives, *, carried: bool
) -> str:
    """Component ``i`` of a heterogeneous job's one ``srun``: group ``g``'s tasks (``carried``:
    the job hands secrets to its tasks, each group's part ``i``)."""
    inner = _group_inner(g, "$SLURM_PROCID", size, _box(g, images, drives), _task(g, log_dir, i, carried))
    launch = step_launch(log_dir).removeprefix("srun ") + _image(g, images, drives, log_dir, i)
    return f"--het-group={i} {launch} bash -c {shlex.quote(inner)} astra-worker {_group_argv(g)}"


def _carry(log_dir: str, secret: bool) -> str:
    """The batch step's wrapper before ``srun`` when the job reads secrets: it reads the job's
    file and hands the values to the tasks in their environment (``jobwrapper``'s ``--carry``)."""
    return secret_wrapper(log_dir, '--carry "$ASTRA_SECRET_FILE" ') if secret else ""


#: What a task of a job that carries other groups' secrets (not its own) runs first: it sheds them.
SHED = "unset ${!ASTRA_SECRET@} ${!ASTRA_JOB_SECRETS@}"


def _task(g: TaskGroup, log_dir: str, part: int, carried: bool) -> str | None:
    """How a group's task takes its secrets: the wrapper's ``--task PART`` when it reads some;
    a task of a job that carries other groups' only sheds them (``SHED``); else nothing."""
    if reads_secrets(g.task_template):
        return secret_wrapper(log_dir, f"--task {part}")
    return SHED if carried else None


def _group_inner(g: TaskGroup, rank: str, size: int, box: str | None, task: str | None) -> str:
    """The per-task wrapper of a group's worker: its env, then CONTRACT §6's names; then the
    command, in the node's sandbox (``box``) when it has drives to mount there, under the
    secrets' wrapper or after the line that sheds them (``task``, ``_task``'s)."""
    env = sorted((g.task_template.env or {}).items())
    parts = [f"export {k}={shlex.quote(v)}" for k, v in env if isinstance(v, str)]  # secrets: the wrapper's
    parts.append(f"export RANK={rank} WORLD_SIZE={size}")
    parts.append("export SLURM_PROCID=$RANK SLURM_NTASKS=$WORLD_SIZE")
    wrapper = None if task == SHED else task
    parts += [task] if task == SHED else []
    parts += [box] if box is not None else []
    return "; ".join([*parts, task_exec(box, wrapper, '"$@"')])


def _group_argv(g: TaskGroup) -> str:
    t = g.task_template
    assert t.command is not None
    return " ".join(shlex.quote(a) for a in [t.command, *(t.args or [])])
