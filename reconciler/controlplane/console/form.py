"""The New → Run form as data: its fields made into a run document, and the API's problems put
beside the fields they name.

Owns ``FIELDS`` (the form's fields, in the seeds' words), ``document_of`` (the fields as the run
document the API takes: the seeds' shapes, ``per_gpu`` with GPUs and no array, per worker
otherwise, ``start: Independent`` forced for an array) and ``field_of`` (a problem's path → the
field it is shown beside). Pure: no I/O, no validation of its own; the one validator is the
server's (``validate_data``, through the API's ``checked``): a value this module cannot read as a
number or a quantity is sent as the text it is, so that the server's words name it.
Must not touch: HTTP, the engine.
"""

from __future__ import annotations

import re
from typing import Any

from ...runspec.quantities import parse_bytes, parse_duration

__all__ = ["ARRAY_START", "FIELDS", "document_of", "field_of"]

#: The form's fields: (name, label, hint).
FIELDS: tuple[tuple[str, str, str], ...] = (
    ("name", "Name", "lowercase letters, digits and '-'"),
    ("image", "Image", "nvcr.io/nvidia/pytorch:24.08-py3"),
    ("command", "Command", "python, or sh"),
    ("args", "Arguments", "one per line, passed as they are"),
    ("gpus", "GPUs", "left empty: none"),
    ("machines", "Machines", "Automatic, or a number"),
    ("cpu", "CPU cores", "per GPU (per worker for an array, or without GPUs)"),
    ("memory", "Memory", "120Gi, 32Gi: per GPU (per worker for an array, or without GPUs)"),
    ("time_limit", "Time limit", "12h, 1h30m, 1:00:00"),
    ("start", "Start", "Automatic: a gang when the run may span machines"),
    ("array_size", "Array size", "1 to 10 000: runs the template that many times"),
    ("max_parallel", "At most in parallel", "0: no cap"),
    ("drives", "Drives", "name:/path, comma separated (name:/path:ro for read-only)"),
)

#: What the form says of the start policy of an array.
ARRAY_START = "Start is forced to independent for an array"

#: A problem's path (a prefix of it) → the form's field; the first that matches wins.
_PLACES: tuple[tuple[str, str], ...] = (
    ("metadata.name", "name"),
    ("spec.task_template.image", "image"),
    ("spec.task_template.command", "command"),
    ("spec.task_template.args", "args"),
    ("spec.task_template.requested_resources.gpu_requests", "gpus"),
    ("spec.task_template.requested_resources.machines", "machines"),
    ("spec.task_template.requested_resources.per_gpu.cpu_cores", "cpu"),
    ("spec.task_template.requested_resources.per_gpu.memory_bytes", "memory"),
    ("spec.task_template.requested_resources.cpu_cores", "cpu"),
    ("spec.task_template.requested_resources.memory_bytes", "memory"),
    ("spec.task_template.time_limit_seconds", "time_limit"),
    ("spec.task_template.datavolume_refs", "drives"),
    ("spec.start", "start"),
    ("spec.policy", "start"),
    ("spec.array.size", "array_size"),
    ("spec.array.max_parallel", "max_parallel"),
    ("spec.array", "array_size"),
)

_WHOLE = re.compile(r"^[0-9]+$")


def field_of(path: str) -> str | None:
    """The field a problem at ``path`` is shown beside; ``None``: above the form."""
    for prefix, name in _PLACES:
        if path == prefix or path.startswith((prefix + ".", prefix + "[")):
            return name
    return None


def _number(text: str) -> int | str:
    return int(text) if _WHOLE.match(text) else text


def _quantity(parse: Any, text: str) -> int | str:
    try:
        return int(parse(text))
    except (TypeError, ValueError):  # not one: sent as given, for the server to name
        return text


def _drives(text: str) -> list[dict[str, Any]]:
    """``datasets:/data,results:/results:ro`` as ``datavolume_refs`` (the mode only when given)."""
    out: list[dict[str, Any]] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, _, where = item.partition(":")
        ref: dict[str, Any] = {"name": name}
        mode = None
        for suffix, said in ((":ro", "ReadOnly"), (":rw", "ReadWrite")):
            if where.endswith(suffix):
                where, mode = where[: -len(suffix)], said
        if where:
            ref["mount_path"] = where
        if mode:
            ref["mode"] = mode
        out.append(ref)
    return out


def _resources(f: dict[str, str], array: bool) -> dict[str, Any]:
    gpus, cpu, memory = f.get("gpus", ""), f.get("cpu", ""), f.get("memory", "")
    out: dict[str, Any] = {}
    if gpus:
        out["gpu_requests"] = {"count": _number(gpus)}
    machines = f.get("machines", "").strip()
    if machines and machines.lower() != "automatic":
        out["machines"] = _number(machines)
    own: dict[str, Any] = {}
    if cpu:
        own["cpu_cores"] = _number(cpu)
    if memory:
        own["memory_bytes"] = _quantity(parse_bytes, memory)
    if own and gpus and not array:
        out["per_gpu"] = own
    else:
        out.update(own)
    return out


def document_of(form: dict[str, str]) -> dict[str, Any]:
    """The run document the form's fields say (empty fields are left out)."""
    f = {k: v.strip() if k != "args" else v for k, v in form.items()}
    template: dict[str, Any] = {}
    if f.get("image"):
        template["image"] = f["image"]
    if f.get("command"):
        template["command"] = f["command"]
    args = [line.rstrip("\r") for line in f.get("args", "").split("\n") if line.strip()]
    if args:
        template["args"] = args
    array = bool(f.get("array_size"))
    resources = _resources(f, array)
    if resources:
        template["requested_resources"] = resources
    if f.get("time_limit"):
        template["time_limit_seconds"] = _quantity(parse_duration, f["time_limit"])
    if f.get("drives"):
        template["datavolume_refs"] = _drives(f["drives"])
    spec: dict[str, Any] = {}
    if array:
        spec["start"] = "Independent"  # ARRAY_START
        spec["array"] = {"size": _number(f["array_size"])}
        if f.get("max_parallel"):
            spec["array"]["max_parallel"] = _number(f["max_parallel"])
    elif f.get("start") and f["start"] != "Automatic":
        spec["start"] = f["start"]
    spec["task_template"] = template
    return {"metadata": {"name": f.get("name", "")}, "spec": spec}
