"""The exact words of the spec layer, and the limits they speak of: one place for both.

The CLI, the API's 422 answers and the JSON Schema's ``errorMessage``s all read from here. A
message may hold ``${1/size}``: a relative JSON Pointer (as ajv-errors writes it) filled in from
the document when the message is shown, so that the editor and the CLI share one text.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "ARRAY_ENGINE",
    "ARRAY_MAX_PARALLEL",
    "ARRAY_SERVICE",
    "ARRAY_SIZE",
    "ARRAY_SIZE_MAX",
    "ARRAY_SIZE_MIN",
    "ARRAY_START",
    "ARRAY_TASK_GROUPS",
    "MAX_PROCESSES",
    "MAX_PROCESSES_DEFAULT",
    "MAX_PROCESSES_MAX",
    "MAX_PROCESSES_MIN",
    "WORKER_NAME_MAX",
]

# ---- limits (the seeds' numbers) -------------------------------------------------------------
ARRAY_SIZE_MIN = 1
ARRAY_SIZE_MAX = 10_000
ARRAY_MAX_PARALLEL_MIN = 0
#: A worker's processes (and threads): the bound when a template gives none, and the range.
MAX_PROCESSES_DEFAULT = 4096
MAX_PROCESSES_MIN = 1
MAX_PROCESSES_MAX = 1_048_576
RESTART_LIMIT = 10
GANG_BARRIER_SECONDS = 15 * 60
MASTER_PORT = 29500
#: Worker names are DNS labels: <run>-<rank> and <run>-<group>-<rank> must fit in 63 characters.
WORKER_NAME_MAX = 63
#: The longest rank an array can give a worker: "-9999".
RUN_NAME_MAX = WORKER_NAME_MAX - len(f"-{ARRAY_SIZE_MAX - 1}")
MAX_FILE_BYTES = 10 * 1024 * 1024
#: A document may expand aliases to at most this many YAML events (a billion-laughs guard).
MAX_ALIAS_EVENTS = 100_000

# ---- limits on hostile input (docs/limits.md lists them all) ---------------------------------
#: Workers in one run: the sum of task_groups[].replicas, or machines; as many as array.size.
WORKERS_MAX = ARRAY_SIZE_MAX
#: Integers are 64-bit, as every Astraeus API and database stores them.
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
#: How deep a document may nest (a run spec needs 8 levels; template parameters a few more).
DEPTH_MAX = 32
#: A whole document, as JSON (Kubernetes keeps objects under 1.5 MiB for the same reason).
DOCUMENT_MAX_BYTES = 1024 * 1024
#: An image reference (OCI: a 255-character name, a 128-character tag, a digest).
IMAGE_MAX = 1024
#: One argument, one environment value, one annotation: Linux's MAX_ARG_STRLEN (131072 bytes).
ARG_MAX = 128 * 1024
#: Any other text: a command, a path, a drive, a label, a name of a variable or a GPU model.
TEXT_MAX = 4096

# ---- the contract's table (CONTRACT.md §2): exact ---------------------------------------------
ARRAY_START = "An array's workers are independent: use policy Independent"
ARRAY_TASK_GROUPS = "An array runs one worker template: task_groups is not allowed with array"
ARRAY_SERVICE = "An array ends when its workers end: lifetime Service is not allowed with array"
ARRAY_ENGINE = "An array cannot run a model engine: model.engine is not allowed with array"
#: ``task_template.stop_grace_seconds`` out of range (issue 31).
STOP_GRACE = "stop_grace_seconds must be from 0 to 3600"
#: ``spec.depends_on[].run`` not a run's name (issue 31).
DEPENDS_ON_RUN = "must be a run's name: lowercase letters, digits and '-', starting with a letter"
#: ``task_template.on_exit_codes[].codes[]`` out of range (issue 31).
EXIT_CODE = "an exit code is from 1 to 255"
ARRAY_SIZE = f"array.size must be from {ARRAY_SIZE_MIN} to {ARRAY_SIZE_MAX}"
MAX_PROCESSES = f"max_processes must be from {MAX_PROCESSES_MIN} to {MAX_PROCESSES_MAX}"
ARRAY_MAX_PARALLEL = "array.max_parallel must be from 0 (no cap) to array.size (${1/size})"
UNKNOWN_FIELD = "unknown field '{name}'"

# ---- the seeds' reasons and readouts (CONTRACT §7): exact ----------------------------------------
WORKERS_READOUT = "Workers {running} running of {total}"
ALL_COMPLETED_REASON = "All {n} workers completed"
ARRAY_CAP_REASON = "Array runs at most {n} workers at once"
EXITED_REASON = "Exited with code {code}"
PULLING_REASON = "Pulling image {image}"
WORKER_FAILED_ON = "Worker {worker} failed on {machine}: {reason}"
ARRAY_FAILED_REASON = "{failed} of {total} workers failed; the first: {first}"
TIME_LIMIT_REASON = "Stopped at its time limit{of}"
RESTART_REASON = "{reason}; restart {n}{of} in {delay} s"
COMPLETION_RESTART_REASON = "{reason}; restarting in {delay} s ({why})"
NO_RESTARTS_LEFT = "{reason}; no restarts left ({limit} used)"
#: A run some of whose workers wait to restart after a failure (``restarting.workers_restarting``).
WORKERS_RESTARTING = "{k} of {n} workers restarting: Worker {worker}: {reason}"
QUOTA_GPUS_REASON = "Workspace {workspace} is at its quota of {n} GPUs"
#: A run that would start while its workspace's GPU-hour budget is spent (issue 35).
BUDGET_SPENT_REASON = "Workspace {workspace} has used its {hours} GPU-hours this {per}"
QUOTA_RUNS_REASON = "Workspace {workspace} is at its quota of {n} running runs"
DID_YOU_MEAN = "; did you mean '{suggestion}'?"

# ---- our own cross-field and value messages ----------------------------------------------------
START_AND_POLICY = "policy is another name for start: give one of them, not both"
MIN_AVAILABLE = "start MinAvailable needs min_available of at least 1"
TEMPLATE_AND_GROUPS = (
    "a run has one worker template or worker groups: give task_template or task_groups, not both"
)
NO_TEMPLATE = "a run needs a worker template: add task_template (or task_groups for worker groups)"
GROUP_START_AFTER_UNKNOWN = "start_after names '{name}', which is not a group of this run; groups: {groups}"
GROUP_START_AFTER_SELF = "a group cannot start after itself"
GROUP_CYCLE = "start_after forms a cycle: {cycle}; one group must start first"
GROUP_DUPLICATE = "group name '{name}' is used twice; group names must be unique in a run"
GANG_START_AFTER = (
    "a gang starts every worker together: start_after is not allowed with start Gang "
    "(leave start out, or use Independent)"
)
GROUP_MACHINES = "machines is not allowed in a worker group: replicas sets how many workers it has"
MACHINES_DIVIDE = (
    "machines ({machines}) must divide gpu_requests.count ({count}) evenly, "
    "so that every machine gets the same number of GPUs"
)
MIN_PER_MACHINE_ABOVE_COUNT = "gpu_requests.min_per_machine ({k}) is more than gpu_requests.count ({count})"
CPU_TWICE = "give cpu_cores or per_gpu.cpu_cores, not both"
MEMORY_TWICE = "give memory_bytes or per_gpu.memory_bytes, not both"
PER_GPU_WITHOUT_GPUS = (
    "per_gpu needs GPUs: add gpu_requests.count, or give cpu_cores and memory_bytes instead"
)
WORKER_NAME_TOO_LONG = (
    "worker names such as '{example}' would be {length} characters; run and group names must "
    f"leave room for '-<rank>' within {WORKER_NAME_MAX}"
)
MOUNT_PATH_DUPLICATE = "mount_path '{path}' is used by two drives; each drive needs its own mount_path"
ENV_RESERVED = "{name} is set by Astraeus in every worker; remove it from env"
WORKERS = f"a run has at most {WORKERS_MAX} workers; this one asks for ${{0}}"
WORKERS_SUM = f"a run has at most {WORKERS_MAX} workers; this one asks for {{n}}"
TEXT = "must be valid Unicode text without NUL characters"
INTEGER_RANGE = f"must be a whole number from {INT_MIN} to {INT_MAX} (64 bits)"
QUANTITY_RANGE = f"is more than {INT_MAX} (64 bits) once read: give a smaller value"
NOT_FINITE = "must be a finite number, not {value}"
TOO_DEEP = f"nests more than {DEPTH_MAX} levels deep: a run spec never needs that many"
DOCUMENT_TOO_LARGE = (
    f"the document is {{size}} bytes as JSON; a run spec may be at most {DOCUMENT_MAX_BYTES} bytes (1 MiB)"
)
UPDATE_REPLACE_ONLY = (
    "{path} cannot change on a run in place: replace the run (astra apply plans it as a replace, "
    "or delete it and create it again)"
)
UPDATE_RENAME = "a run cannot be renamed: create a run of the new name and delete the old one"

NAME = (
    f"must be a lowercase name of at most {RUN_NAME_MAX} characters: letters, digits and '-', "
    "starting with a letter and not ending with '-' (it becomes part of worker names)"
)
GROUP_NAME = (
    "must be a lowercase name: letters, digits and '-', starting with a letter and not ending "
    "with '-' (workers are named <run>-<group>-<rank>)"
)
BYTES = (
    "must be a size in bytes: an integer, or a number with a unit such as 512Mi, 120Gi, 32G "
    "(K, M, G, T, P and Ki … Pi are powers of 1024)"
)
DURATION = (
    "must be a duration of at least 1 second: an integer (seconds), or a duration such as 90m, "
    "12h, 1h30m, 2d, 1:00:00 or 1-12:00:00"
)
ENV_NAME = "environment variable names are letters, digits and '_', not starting with a digit"
ENV_VALUE = 'must be a string: quote the value ("8080", "true")'
MOUNT_PATH = "must be an absolute path, starting with '/'"
LABEL_VALUE = "must be a string: quote the value"


def describe(value: Any) -> str:
    """A value in words, for messages: ``the string "10"``, ``the number 3``, ``a list``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {json.dumps(value)}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {json.dumps(value)}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


# ---- astra.yaml (the sources file) ----
SOURCE_NEEDS_ONE = "a source needs a repo (a git URL) or a path (a folder)"
SOURCE_NOT_BOTH = "give a source a repo or a path, not both"
SOURCE_REPO_ONLY = "only a source with a repo has a ref: a path is read as it is on disk"
SOURCE_DUPLICATE = "source name '{name}' is also used by sources[{other}]: source names must be unique"
ALERT_DUPLICATE = "alert name '{name}' is also used by alerts[{other}]: a source's alert names must be unique"

# ---- warnings (``reconciler.runspec.lint``): the seeds' troubleshooting table, and a trap ----------
LINT_SLURM_ARRAY_TASK_ID = "SLURM_ARRAY_TASK_ID is not set in an array's copies: read ASTRAEUS_ARRAY_TASK_ID"
LINT_NO_TIME_LIMIT = "without a time limit a run cannot backfill"
LINT_ONE_STRING_COMMAND = "arguments are passed as they are: put them in args, or use command sh with args -c"
