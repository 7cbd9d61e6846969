"""Cross-field rules of a run spec: pure functions over the plain document.

Two kinds of rules live here:

* ``COMBINATIONS``: the seeds' forbidden combinations, as data. The JSON Schema's
  ``allOf``/``if``/``then`` blocks are generated from this table (so an editor flags them with
  the same words), and ``check_rules`` checks the same table.
* rules a JSON Schema cannot say (one field compared with another, names that must exist, no
  cycles); these are checked here only, and ``astra validate`` runs them after the schema.

Every rule reads the plain document (dicts and lists, as loaded), tolerates values of the wrong
type (the schema reports those), and returns every error it finds.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from . import messages as msg
from .errors import FieldError
from .paths import FieldPath
from .quantities import parse_bytes, parse_duration

__all__ = ["COMBINATIONS", "Combination", "check_rules"]

SPEC = FieldPath.root().child("spec")
_TEMPLATE = SPEC.child("task_template")
_GROUPS = SPEC.child("task_groups")
_RES = "requested_resources"
RESERVED_ENV = (
    "RANK",
    "WORLD_SIZE",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "MASTER_ADDR",
    "MASTER_PORT",
    "ASTRAEUS_ARRAY_TASK_ID",
    "ASTRAEUS_ARRAY_SIZE",
    "ASTRAEUS_REPLICA_INDEX",
)
_RESERVED = frozenset(RESERVED_ENV)


@dataclass(frozen=True)
class Combination:
    """When ``when`` is present in spec, the field at ``field`` must be absent or ``allowed``.

    ``allowed=None`` forbids the field outright.
    """

    when: str
    field: tuple[str, ...]
    allowed: str | None
    message: str


COMBINATIONS: tuple[Combination, ...] = (
    Combination("array", ("start",), "Independent", msg.ARRAY_START),
    Combination("array", ("policy",), "Independent", msg.ARRAY_START),
    Combination("array", ("task_groups",), None, msg.ARRAY_TASK_GROUPS),
    Combination("array", ("lifetime",), "Batch", msg.ARRAY_SERVICE),
    Combination("array", ("model", "engine"), None, msg.ARRAY_ENGINE),
    Combination("start", ("policy",), None, msg.START_AND_POLICY),
    Combination("task_groups", ("task_template",), None, msg.TEMPLATE_AND_GROUPS),
)


#: the combinations by the field that brings them into play (what nearly every spec lacks)
_WHEN: dict[str, tuple[Combination, ...]] = {
    when: tuple(r for r in COMBINATIONS if r.when == when)
    for when in dict.fromkeys(r.when for r in COMBINATIONS)
}


def _dig(obj: Any, steps: tuple[str, ...]) -> Any:
    for step in steps:
        if not isinstance(obj, dict) or step not in obj:
            return None
        obj = obj[step]
    return obj


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def check_rules(doc: Any, *, partial: bool = False, combinations: bool = True) -> list[FieldError]:
    """Every cross-field problem of a run document. ``partial`` skips what a template may add;
    without ``combinations``, the forbidden combinations are not checked: the caller knows the
    published schema passed the document, and it says them all (its blocks are made from
    ``COMBINATIONS``).

    This runs for every document, and nearly all of them are valid: each field is read once, a
    rule whose fields are absent costs no call, and the rules append to one list (paths are
    built only for an error)."""
    if not isinstance(doc, dict):
        return []
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        return []
    errors: list[FieldError] = []
    if combinations:
        _combinations(spec, errors)
    array = spec.get("array")
    if isinstance(array, dict):
        _array(array, errors)
    start = spec["start"] if "start" in spec else spec.get("policy")
    if start == "MinAvailable":
        _min_available(spec, partial, errors)
    if not partial and "task_template" not in spec and "task_groups" not in spec:
        errors.append(FieldError.required(_TEMPLATE, msg.NO_TEMPLATE))
    schedule = spec.get("schedule")
    if isinstance(schedule, dict):
        from .schedules import name_problem, schedule_errors

        errors += schedule_errors(schedule, SPEC.child("schedule"))
        meta = doc.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        if isinstance(name, str) and (problem := name_problem(name)):
            errors.append(FieldError.invalid(FieldPath.root().child("metadata").child("name"), problem))
    template = spec.get("task_template")
    if isinstance(template, dict):
        _task_template(template, _TEMPLATE, False, errors)
    groups = spec.get("task_groups")
    if isinstance(groups, list):
        _groups(groups, start, errors)
        _worker_names(doc, groups, errors)
        _workers(groups, errors)
    return errors


def _combinations(spec: dict, errors: list[FieldError]) -> None:
    found = []
    for when, rules in _WHEN.items():
        if spec.get(when) is None:
            continue
        for rule in rules:
            value = _dig(spec, rule.field)
            if value is not None and value != rule.allowed:
                found.append(rule)
    if len(found) > 1:
        found.sort(key=COMBINATIONS.index)  # the table's order, whatever the grouping
    errors += [FieldError.forbidden(SPEC.child(*rule.field), rule.message) for rule in found]


def _array(array: dict, errors: list[FieldError]) -> None:
    size, max_parallel = _int(array.get("size")), _int(array.get("max_parallel"))
    if size is None or max_parallel is None or not msg.ARRAY_SIZE_MIN <= size <= msg.ARRAY_SIZE_MAX:
        return
    if 0 <= max_parallel <= size:
        return
    text = msg.ARRAY_MAX_PARALLEL.replace("${1/size}", str(size))
    errors.append(FieldError.invalid(SPEC.child("array", "max_parallel"), text))


def _min_available(spec: dict, partial: bool, errors: list[FieldError]) -> None:
    """The rules of ``start: MinAvailable``."""
    if "min_available" not in spec:
        if not partial:
            errors.append(FieldError.required(SPEC.child("min_available"), msg.MIN_AVAILABLE))
        return
    value = _int(spec["min_available"])
    if value is not None and value < 1:
        errors.append(FieldError.invalid(SPEC.child("min_available"), msg.MIN_AVAILABLE))


def _task_template(template: dict, path: FieldPath, in_group: bool, errors: list[FieldError]) -> None:
    """The rules of one task template at ``path``."""
    get = template.get
    value = get("time_limit_seconds")
    if isinstance(value, str) and _too_big("time_limit_seconds", value):
        errors.append(FieldError.invalid(path.child("time_limit_seconds"), msg.QUANTITY_RANGE))
    resources = get(_RES)
    if isinstance(resources, dict):
        _resources(resources, path, in_group, errors)
    env = get("env")
    if isinstance(env, dict) and not _RESERVED.isdisjoint(env):
        for name in sorted(k for k in env if k in _RESERVED):
            errors.append(
                FieldError.forbidden(path.child("env").key(name), msg.ENV_RESERVED.format(name=name))
            )
    volumes = get("datavolume_refs")
    if isinstance(volumes, list) and len(volumes) > 1:  # a mount path used twice
        seen: set[str] = set()
        for i, ref in enumerate(volumes):
            mount = ref.get("mount_path") if isinstance(ref, dict) else None
            if not isinstance(mount, str):
                continue
            mount = mount.rstrip("/")
            if mount in seen:
                errors.append(
                    FieldError.duplicate(
                        path.child("datavolume_refs").index(i).child("mount_path"),
                        msg.MOUNT_PATH_DUPLICATE.format(path=ref["mount_path"]),
                    )
                )
            seen.add(mount)


def _resources(res: dict, template: FieldPath, in_group: bool, errors: list[FieldError]) -> None:
    """The rules of ``requested_resources`` under the task template at ``template``: first its
    quantities (a friendly quantity read as more than 64 bits, ``99999999999P``, is no size),
    then how its fields go together."""
    get = res.get
    value = get("memory_bytes")
    if isinstance(value, str) and _too_big("memory_bytes", value):
        errors.append(FieldError.invalid(template.child(_RES, "memory_bytes"), msg.QUANTITY_RANGE))
    per_gpu = get("per_gpu")
    if isinstance(per_gpu, dict):
        value = per_gpu.get("memory_bytes")
        if isinstance(value, str) and _too_big("memory_bytes", value):
            path = template.child(_RES, "per_gpu", "memory_bytes")
            errors.append(FieldError.invalid(path, msg.QUANTITY_RANGE))
    gpus = get("gpu_requests")
    count = _int(gpus.get("count")) if isinstance(gpus, dict) else None
    if in_group and "machines" in res:
        errors.append(FieldError.forbidden(template.child(_RES, "machines"), msg.GROUP_MACHINES))
    elif count is not None and count >= 1 and "machines" in res:
        machines = _int(res["machines"])
        if machines is not None and machines >= 1 and count % machines:
            text = msg.MACHINES_DIVIDE.format(machines=machines, count=count)
            errors.append(FieldError.invalid(template.child(_RES, "machines"), text))
    if isinstance(gpus, dict) and "min_per_machine" in gpus:
        k = _int(gpus["min_per_machine"])
        if k is not None and count is not None and k > count >= 1:
            errors.append(
                FieldError.invalid(
                    template.child(_RES, "gpu_requests", "min_per_machine"),
                    msg.MIN_PER_MACHINE_ABOVE_COUNT.format(k=k, count=count),
                )
            )
    if isinstance(per_gpu, dict):
        if gpus is None and "gpu_requests" not in res:
            errors.append(FieldError.forbidden(template.child(_RES, "per_gpu"), msg.PER_GPU_WITHOUT_GPUS))
        if "cpu_cores" in per_gpu and "cpu_cores" in res:
            errors.append(FieldError.forbidden(template.child(_RES, "per_gpu", "cpu_cores"), msg.CPU_TWICE))
        if "memory_bytes" in per_gpu and "memory_bytes" in res:
            errors.append(
                FieldError.forbidden(template.child(_RES, "per_gpu", "memory_bytes"), msg.MEMORY_TWICE)
            )


@lru_cache(maxsize=256)
def _group(i: int, *steps: str) -> FieldPath:
    """``spec.task_groups[i]…``: built once a process (every document with groups asks)."""
    return _GROUPS.index(i).child(*steps)


def _groups(groups: list, start: Any, errors: list[FieldError]) -> None:
    """The rules of ``task_groups``: unique names, each group's template, and ``start_after``."""
    path = _GROUPS
    names: dict[str, int] = {}
    for i, group in enumerate(groups):
        if not isinstance(group, dict):
            continue
        name = group.get("name")
        if isinstance(name, str):
            if name in names:
                errors.append(
                    FieldError.duplicate(path.index(i).child("name"), msg.GROUP_DUPLICATE.format(name=name))
                )
            else:
                names[name] = i
        template = group.get("task_template")
        if isinstance(template, dict):
            _task_template(template, _group(i, "task_template"), True, errors)
    if start == "Gang":
        for i, group in enumerate(groups):
            if isinstance(group, dict) and group.get("start_after") is not None:
                errors.append(FieldError.forbidden(path.index(i).child("start_after"), msg.GANG_START_AFTER))
    after: dict[str, str] = {}
    for i, group in enumerate(groups):
        if not isinstance(group, dict):
            continue
        name, target = group.get("name"), group.get("start_after")
        if not isinstance(target, str):
            continue
        where = _group(i, "start_after")
        if target == name:
            errors.append(FieldError.invalid(where, msg.GROUP_START_AFTER_SELF))
        elif target not in names:
            listed = ", ".join(sorted(names)) or "none"
            errors.append(
                FieldError.invalid(where, msg.GROUP_START_AFTER_UNKNOWN.format(name=target, groups=listed))
            )
        elif isinstance(name, str):
            after[name] = target
    if after:
        errors += _cycles(after, names, path)


def _cycles(after: dict[str, str], names: dict[str, int], path: FieldPath) -> list[FieldError]:
    """Each cycle of start_after once, reported at its first group in file order."""
    errors, reported = [], set()
    for start in sorted(after, key=names.__getitem__):
        chain, node = [start], after.get(start)
        while node is not None and node not in chain:
            chain.append(node)
            node = after.get(node)
        if node is None:
            continue
        cycle = chain[chain.index(node) :]
        if frozenset(cycle) in reported:
            continue
        reported.add(frozenset(cycle))
        first = min(cycle, key=names.__getitem__)
        order = cycle[cycle.index(first) :] + cycle[: cycle.index(first)] + [first]
        errors.append(
            FieldError.invalid(
                path.index(names[first]).child("start_after"), msg.GROUP_CYCLE.format(cycle=" → ".join(order))
            )
        )
    return errors


def _workers(groups: list, errors: list[FieldError]) -> None:
    """At most ``WORKERS_MAX`` workers in a run, summed over its groups.

    One group over the limit alone is the schema's to say (at its ``replicas``, with the same
    words); this rule speaks of the sum.
    """
    replicas = [_int(g.get("replicas", 1)) if isinstance(g, dict) else None for g in groups]
    counts = [n for n in replicas if n is not None and n >= 1]
    if any(n > msg.WORKERS_MAX for n in counts) or sum(counts) <= msg.WORKERS_MAX:
        return
    errors.append(FieldError.invalid(_GROUPS, msg.WORKERS_SUM.format(n=sum(counts))))


@lru_cache(maxsize=4096)
def _too_big(key: str, value: str) -> bool:
    """Whether the quantity ``value`` of ``key`` reads as more than 64 bits; ``False`` for what
    is no quantity at all (the schema's pattern says so). Specs repeat the same few quantities
    (``80Gi``, ``12h``), so each is read once a process."""
    parse = parse_duration if key == "time_limit_seconds" else parse_bytes
    try:
        return parse(value) > msg.INT_MAX
    except ValueError:
        return False


def _worker_names(doc: dict, groups: list, errors: list[FieldError]) -> None:
    """<run>-<group>-<rank> must fit a DNS label; <run>-<rank> is bounded by the name's own limit."""
    metadata = doc.get("metadata")
    run = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(run, str):
        return
    for i, group in enumerate(groups):
        if not isinstance(group, dict) or not isinstance(group.get("name"), str):
            continue
        replicas = _int(group.get("replicas", 1)) or 1
        example = f"{run}-{group['name']}-{max(replicas - 1, 0)}"
        if len(example) > msg.WORKER_NAME_MAX:
            errors.append(
                FieldError.invalid(
                    _GROUPS.index(i).child("name"),
                    msg.WORKER_NAME_TOO_LONG.format(example=example, length=len(example)),
                )
            )
