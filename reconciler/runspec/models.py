"""The run spec as pydantic v2 models: the one source of fields, types, defaults and limits.

The published JSON Schema (``reconciler.runspec.schema``) is generated from these classes, so a
field's title, description, limits and ``errorMessage`` are written here once. Cross-field rules
live in ``reconciler.runspec.rules``; ``Run`` runs them as its own validator, so a model can never
hold a spec that ``astra validate`` would refuse.

Defaults that depend on the rest of the spec are not stored: ``start`` is resolved by
``resolve_start`` (Independent for arrays and one-machine runs, Gang for runs that may span
machines), and ``on_failure`` by ``resolve_on_failure`` (RestartJob for gangs, RestartTask
otherwise). Fields left out stay ``None``; that is what "not given" means everywhere.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)

from . import messages as msg
from .fields import _LABEL, _Arg, _bytes, _names_then_values, _range_message, _seconds, _Strict, _Text
from .lifecycle import (
    EXIT_CODE_MAX,
    EXIT_CODE_MIN,
    STOP_GRACE_MAX,
    DependsWhen,
    ExitAction,
    ReplacePolicy,
    StopSignal,
)
from .schedule_spec import ScheduleSpec
from .secrets import SecretFile, SecretRef, env_value_schema

#: ``Run.model_validate(doc, context=RULES_CHECKED)``: the caller ran ``validate_data`` on ``doc``
#: (which checks the rules) and found nothing, so the model does not check them again.
RULES_CHECKED = {"rules_checked": True}

__all__ = [
    "RULES_CHECKED",
    "Array",
    "DataVolumeRef",
    "Dependency",
    "ExitCodeRule",
    "GpuRequests",
    "Metadata",
    "Model",
    "Network",
    "PerGpu",
    "Resources",
    "Run",
    "Spec",
    "TaskGroup",
    "TaskTemplate",
    "TemplateRef",
    "Topology",
    "resolve_on_failure",
    "resolve_start",
]

NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
MOUNT_PATH_PATTERN = r"^/"

StartPolicy = Literal["Gang", "MinAvailable", "Independent"]
OnFailure = Literal["RestartJob", "RestartTask", "FailJob"]
RestartPolicy = Literal["OnFailure", "Never", "Always"]
Lifetime = Literal["Batch", "Service"]
Interconnect = Literal["nvlink", "infiniband", "rdma", "ethernet"]
KeepWithin = Literal["nvlink_domain", "fabric", "rack"]
VolumeMode = Literal["ReadOnly", "ReadWrite"]


# ---- metadata ---------------------------------------------------------------------------------


class Metadata(_Strict):
    """Who the run is: its name, and labels and annotations for people and tools."""

    name: str = Field(
        title="Name",
        description=(
            "The run's name, unique in its workspace. Workers are named <name>-<rank> "
            "(train-0, train-1) or <name>-<group>-<rank>."
        ),
        max_length=msg.RUN_NAME_MAX,
        pattern=NAME_PATTERN,
        json_schema_extra={"errorMessage": msg.NAME},
    )
    labels: dict[_Text, Annotated[str, Field(max_length=msg.TEXT_MAX, json_schema_extra=_LABEL)]] | None = (
        Field(None, title="Labels", description="Short key-value pairs to select and group runs by.")
    )
    annotations: (
        dict[_Text, Annotated[str, Field(max_length=msg.ARG_MAX, json_schema_extra=_LABEL)]] | None
    ) = Field(
        None,
        title="Annotations",
        description="Free-form notes for people and tools; not used to select runs.",
    )
    resource_version: int | None = Field(
        None,
        title="Resource version",
        description=(
            "Set by the server on every change. Give it back unchanged when updating a run, so "
            "that a concurrent change is a conflict and not an overwrite."
        ),
        ge=0,
    )


# ---- resources --------------------------------------------------------------------------------


class GpuRequests(_Strict):
    """The GPUs a run asks for, and what they must be."""

    count: int = Field(
        title="GPUs",
        description=(
            "GPUs for the whole run; the scheduler picks how many machines and how many GPUs on "
            "each, unless machines or min_per_machine say otherwise. In an array, every copy "
            "gets this many."
        ),
        ge=1,
        le=msg.INT_MAX,
    )
    min_per_machine: int | None = Field(
        None,
        title="At least per machine",
        description="Never fewer than this many GPUs on one machine.",
        ge=1,
        le=msg.INT_MAX,
    )
    models: list[_Text] | None = Field(
        None,
        title="GPU models",
        description="Only these GPU models (for example H100, A100).",
        min_length=1,
    )
    min_memory_gb: float | None = Field(
        None, title="Minimum GPU memory (GB)", description="Only GPUs with at least this much memory.", ge=0
    )
    healthy_only: bool | None = Field(
        None, title="Healthy GPUs only", description="Only GPUs that pass their health checks."
    )


class PerGpu(_Strict):
    """CPU cores and memory that follow the GPUs, so the total fits whatever shape is chosen."""

    cpu_cores: int | None = Field(None, title="CPU cores per GPU", ge=1, le=msg.INT_MAX)
    memory_bytes: _bytes("Memory per GPU", "Memory per GPU: 120Gi, or bytes.") | None = None  # type: ignore[valid-type]


class Resources(_Strict):
    """What each worker (or the whole run, for GPUs) needs."""

    cpu_cores: int | None = Field(
        None, title="CPU cores", description="CPU cores per worker.", ge=1, le=msg.INT_MAX
    )
    memory_bytes: _bytes("Memory", "Memory per worker: 32Gi, 512Mi, or bytes.") | None = None  # type: ignore[valid-type]
    machines: int | None = Field(
        None,
        title="Machines",
        description="Exactly this many machines, one worker on each, with the GPUs split evenly.",
        ge=1,
        le=msg.WORKERS_MAX,
        json_schema_extra=_range_message(msg.WORKERS, ("maximum",)),
    )
    gpu_requests: GpuRequests | None = Field(None, title="GPUs")
    per_gpu: PerGpu | None = Field(None, title="Per GPU")


class DataVolumeRef(_Strict):
    """A drive mounted into every worker."""

    name: str = Field(
        title="Drive", description="The drive's name in the workspace.", min_length=1, max_length=msg.TEXT_MAX
    )
    mount_path: str = Field(
        title="Mount path",
        description="Where the drive appears inside the worker.",
        max_length=msg.TEXT_MAX,
        pattern=MOUNT_PATH_PATTERN,
        json_schema_extra={"errorMessage": msg.MOUNT_PATH},
    )
    mode: VolumeMode = Field("ReadWrite", title="Mode", description="ReadOnly or ReadWrite.")


class ExitCodeRule(_Strict):
    """What some exit codes of a failed worker mean (the first rule that names the code decides)."""

    codes: list[
        Annotated[
            int,
            Field(ge=EXIT_CODE_MIN, le=EXIT_CODE_MAX, json_schema_extra=_range_message(msg.EXIT_CODE)),
        ]
    ] = Field(
        title="Exit codes",
        description="The exit codes this rule is for (137: killed, 143: TERM).",
        min_length=1,
    )
    action: ExitAction = Field(
        title="Action",
        description=(
            "FailJob: the run fails at once, not restarted. Restart: restarted as restart_policy says, "
            "spending the restart budget. RestartIgnoreBudget: restarted without spending it."
        ),
    )


class TaskTemplate(_Strict):
    """One worker: an image, a command, and what it needs."""

    image: str = Field(
        title="Image",
        description="The container image, e.g. nvcr.io/nvidia/pytorch:24.08-py3.",
        min_length=1,
        max_length=msg.IMAGE_MAX,
    )
    command: str | None = Field(
        None,
        title="Command",
        description=(
            "The program to run; the image's entrypoint when left out. No shell expands $VARS "
            "unless it is sh -c."
        ),
        max_length=msg.TEXT_MAX,
    )
    args: list[_Arg] | None = Field(None, title="Arguments", description="Passed to the command as they are.")
    env: (
        dict[
            Annotated[str, Field(pattern=ENV_NAME_PATTERN, max_length=msg.TEXT_MAX)],
            Annotated[
                Annotated[str, Field(max_length=msg.ARG_MAX)] | SecretRef, WithJsonSchema(env_value_schema())
            ],
        ]
        | None
    ) = Field(
        None,
        title="Environment",
        description="Extra environment variables for every worker; {secret: NAME} for a secret's value.",
        json_schema_extra=_names_then_values(ENV_NAME_PATTERN, msg.ENV_NAME),
    )
    restart_policy: RestartPolicy = Field(
        "OnFailure",
        title="Restart policy",
        description=(
            "OnFailure: a failed or lost worker is restarted, up to 10 times, waiting 10 s before "
            "the first restart and doubling up to 5 min. Never: not restarted. Always: also "
            "restarted when it completes."
        ),
    )
    time_limit_seconds: (
        _seconds(  # type: ignore[valid-type]
            "Time limit",
            "The longest a worker may run: 12h, 1h30m, 1:00:00, or seconds. A worker stopped by its "
            "time limit is never restarted. Runs whose workers all state one can backfill.",
        )
        | None
    ) = None
    datavolume_refs: list[DataVolumeRef] | None = Field(None, title="Drives")
    secret_files: list[SecretFile] | None = Field(
        None, title="Secret files", description="Secrets of the workspace as read-only files (mode 0400)."
    )
    requested_resources: Resources | None = Field(None, title="Resources")
    max_processes: int | None = Field(
        None,
        title="At most processes",
        description=(
            f"The most processes (threads count) a worker may have at once, from {msg.MAX_PROCESSES_MIN} "
            f"to {msg.MAX_PROCESSES_MAX}; {msg.MAX_PROCESSES_DEFAULT} when left out. A fork past it "
            "fails (EAGAIN), and the worker's reason says so."
        ),
        ge=msg.MAX_PROCESSES_MIN,
        le=msg.MAX_PROCESSES_MAX,
        json_schema_extra=_range_message(msg.MAX_PROCESSES),
    )
    on_exit_codes: list[ExitCodeRule] | None = Field(
        None,
        title="On exit codes",
        description=(
            "Rules by exit code, checked in order before restart_policy: e.g. [{codes: [3], action: "
            "FailJob}, {codes: [137, 143], action: RestartIgnoreBudget}]."
        ),
    )
    stop_grace_seconds: int | None = Field(
        None,
        title="Stop grace",
        description=(
            "Seconds between the stop signal and SIGKILL, for every stop (preemption, cancel, delete, "
            "time limit, replace): time to write a checkpoint. 0 to 3600; 30 when left out."
        ),
        ge=0,
        le=STOP_GRACE_MAX,
        json_schema_extra=_range_message(msg.STOP_GRACE),
    )
    stop_signal: StopSignal | None = Field(
        None,
        title="Stop signal",
        description=(
            "What a worker is sent first when it is stopped: TERM (the default), INT, USR1, USR2, HUP "
            "or QUIT."
        ),
    )


# ---- run-level parts --------------------------------------------------------------------------


class Array(_Strict):
    """The same worker template run many times, each copy with its own index."""

    size: int = Field(
        title="Array size",
        description="How many copies: workers <run>-0 … <run>-<size−1>, from 1 to 10000.",
        ge=msg.ARRAY_SIZE_MIN,
        le=msg.ARRAY_SIZE_MAX,
        json_schema_extra=_range_message(msg.ARRAY_SIZE),
    )
    max_parallel: int | None = Field(
        None,
        title="At most in parallel",
        description="How many copies may hold machines at once: 0 (no cap) to size.",
        ge=msg.ARRAY_MAX_PARALLEL_MIN,
        le=msg.ARRAY_SIZE_MAX,
        json_schema_extra=_range_message(msg.ARRAY_MAX_PARALLEL),
    )


class Network(_Strict):
    interconnect: Interconnect | None = Field(
        None,
        title="Slowest interconnect allowed",
        description="Never slower than this between workers: nvlink, infiniband, rdma or ethernet.",
    )


class Topology(_Strict):
    keep_within: KeepWithin | None = Field(
        None,
        title="Keep within",
        description="Keep the whole run inside one NVLink domain, fabric or rack.",
    )


class Model(_Strict):
    engine: str | None = Field(
        None,
        title="Model engine",
        description="The model-serving engine this run runs.",
        min_length=1,
        max_length=msg.TEXT_MAX,
    )


class TaskGroup(_Strict):
    """A worker group: its own template and size, optionally starting after another group."""

    name: str = Field(
        title="Group name",
        description="Workers of the group are named <run>-<group>-<rank>.",
        pattern=NAME_PATTERN,
        max_length=msg.RUN_NAME_MAX,
        json_schema_extra={"errorMessage": msg.GROUP_NAME},
    )
    replicas: int = Field(
        1,
        title="Workers",
        description="How many workers this group has; each gets the template's whole ask.",
        ge=1,
        le=msg.WORKERS_MAX,
        json_schema_extra=_range_message(msg.WORKERS, ("maximum",)),
    )
    task_template: TaskTemplate = Field(title="Worker template")
    start_after: str | None = Field(
        None,
        title="Start after",
        description="The name of another group of this run; this group starts once that one runs.",
        min_length=1,
        max_length=msg.TEXT_MAX,
    )


class Dependency(_Strict):
    """Another run of the workspace this run starts after."""

    run: str = Field(
        title="Run",
        description="The name of the other run (in the same workspace).",
        pattern=NAME_PATTERN,
        max_length=msg.RUN_NAME_MAX,
        json_schema_extra={"errorMessage": msg.DEPENDS_ON_RUN},
    )
    when: DependsWhen = Field(
        "Completed",
        title="When",
        description=(
            "Completed (the default): start once it completed. Failed: once it failed. Finished: "
            "once it ended, however. A run whose dependency ended otherwise fails, in words."
        ),
    )


class Spec(_Strict):
    """What the run does and how the scheduler treats it."""

    start: StartPolicy | None = Field(
        None,
        title="Start",
        description=(
            "Gang: every worker placed and started together, behind a barrier of up to 15 minutes. "
            "MinAvailable: starts once min_available workers can start together. Independent: each "
            "worker starts when it fits. Left out: Independent for arrays and one-machine runs, "
            "Gang for runs that may span machines."
        ),
    )
    policy: StartPolicy | None = Field(
        None, title="Start (another name)", description="Another name for start; give one of them."
    )
    min_available: int | None = Field(
        None,
        title="Minimum available",
        description="With start MinAvailable: how many workers must be able to start together.",
        ge=1,
        json_schema_extra=_range_message(msg.MIN_AVAILABLE),
    )
    on_failure: OnFailure | None = Field(
        None,
        title="On failure",
        description=(
            "What a restart covers. RestartJob: every worker. RestartTask: only the failed one (in a "
            "gang, losing the leader still restarts all). FailJob: no restart; the run fails. Left "
            "out: RestartJob for gangs, RestartTask otherwise."
        ),
    )
    lifetime: Lifetime = Field(
        "Batch",
        title="Lifetime",
        description=(
            "Batch: ends when its workers end. Service: runs until deleted, restarted whenever it ends."
        ),
    )
    priority: int | None = Field(
        None,
        title="Priority",
        description="Higher runs first, and may preempt lower; preempted workers keep their restart budget.",
        ge=-(2**31),
        le=2**31 - 1,
    )
    replace: ReplacePolicy | None = Field(
        None,
        title="Replace",
        description=(
            "When a change that forces a replace of this run, while it holds workers, is carried out. "
            "WhenFinished: held until the run ends (astra apply --replace RUN does it at once). "
            "Immediately: the run is stopped and started again. Left out: Immediately for a "
            "Service, WhenFinished otherwise. Changing it never stops the run."
        ),
    )
    depends_on: list[Dependency] | None = Field(
        None,
        title="Depends on",
        description=(
            "Runs this run waits for: [{run: preprocess, when: Completed}]. It stays Pending with "
            "'Waiting for run preprocess (Running)' until each has ended as asked."
        ),
    )
    schedule: ScheduleSpec | None = Field(
        None,
        title="Schedule",
        description=(
            "Made at each time of a cron schedule, as a run <name>-<YYYYMMDD-HHMM> (a time missed "
            "while the server was down: once). Not on Slurm."
        ),
    )
    array: Array | None = Field(None, title="Array")
    network: Network | None = Field(None, title="Network")
    topology: Topology | None = Field(None, title="Topology")
    model: Model | None = Field(None, title="Model")
    task_template: TaskTemplate | None = Field(None, title="Worker template")
    task_groups: list[TaskGroup] | None = Field(None, title="Worker groups", min_length=1)

    @property
    def start_policy(self) -> StartPolicy | None:
        """``start``, or its other name ``policy``."""
        return self.start or self.policy


class TemplateRef(_Strict):
    """The template this run spec is written on top of."""

    name: str = Field(
        title="Template",
        description="A template in templates/ or on ASTRA_TEMPLATE_PATH.",
        min_length=1,
        max_length=msg.TEXT_MAX,
    )
    parameters: dict[str, Any] | None = Field(
        None, title="Parameters", description="Values for the template's parameters."
    )


class Run(_Strict):
    """A run spec: ``metadata`` and ``spec``, the shape of the seeds' run.json."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        strict=True,
        title="Astraeus run",
        json_schema_extra={
            "description": (
                "A run for an Astraeus GPU cluster, as astra validates and applies it: an image, a "
                "command, and what it needs."
            )
        },
    )

    metadata: Metadata = Field(title="Metadata")
    spec: Spec = Field(title="Spec")
    template: TemplateRef | None = Field(None, title="Template")

    @model_validator(mode="before")
    @classmethod
    def _rules(cls, data: Any, info: ValidationInfo) -> Any:
        if info.context is RULES_CHECKED:
            return data
        from .rules import check_rules

        errors = check_rules(data)
        if errors:
            raise ValueError("; ".join(f"{e.path}: {e.message}" for e in errors))
        return data


# ---- defaults that depend on the spec ---------------------------------------------------------


def resolve_start(spec: Spec, largest_machine_gpus: int | None = None) -> StartPolicy:
    """The seeds' default for ``start`` when it is left out.

    Independent for arrays, for runs that fit one machine, and for worker groups that start one
    after another (``start_after``); Gang for runs that may span machines. Whether a GPU count
    fits one machine is the scheduler's to know: it passes the largest machine's GPU count.
    Without it, a run that asks for one machine (or names none and has one worker group of one)
    is Independent and anything else is Gang.
    """
    if spec.start_policy is not None:
        return spec.start_policy
    if spec.array is not None:
        return "Independent"
    if spec.task_groups is not None:
        if any(g.start_after for g in spec.task_groups):
            return "Independent"  # one group starting after another cannot start together
        return "Gang" if sum(g.replicas for g in spec.task_groups) > 1 else "Independent"
    resources = spec.task_template.requested_resources if spec.task_template else None
    if resources is None or resources.gpu_requests is None:
        return "Independent" if resources is None or (resources.machines or 1) == 1 else "Gang"
    if resources.machines is not None:
        return "Independent" if resources.machines == 1 else "Gang"
    if largest_machine_gpus is not None and resources.gpu_requests.count <= largest_machine_gpus:
        return "Independent"
    return "Gang"


def resolve_on_failure(spec: Spec, start: StartPolicy) -> OnFailure:
    """RestartJob for gangs, RestartTask otherwise (the seeds' defaults)."""
    if spec.on_failure is not None:
        return spec.on_failure
    return "RestartJob" if start == "Gang" else "RestartTask"
