"""The run documents behind the seeds' imperative commands: ``astra astraeus run`` and ``astra slurm sbatch``.

Owns: ``run_document`` (the flags of ``astra astraeus run`` as a run spec: independent start,
``restart_policy: Never``; with GPUs ``--cpus``/``--mem`` are per GPU, without they are per
worker; ``defaults=False``: only what the flags say, for a run written on a template, which then
gets the CLI's defaults only where the template says nothing: ``with_cli_defaults``) and
``sbatch_document`` (a batch script's ``#SBATCH`` directives and body as a run spec: an array
run when it has ``--array``). Pure: text and values in, a document out, or
``SubmitError`` naming the offending flag or directive. Must not touch: a cluster, files.

``#SBATCH`` directives read (``--key=value`` or ``--key value``)::

    --array=0-N[%M]         array.size N+1, array.max_parallel M (indices must be 0..N in steps of 1)
    --gres=gpu[:MODEL]:N    gpu_requests.count N (and models [MODEL])
    --cpus-per-task=N       cpu_cores N per worker
    --mem=SIZE              memory per worker (Slurm's units: a bare number is MiB; K, M, G, T)
    --time=TIME             time_limit_seconds (minutes, MM:SS, H:MM:SS, D-H, D-H:MM, D-H:MM:SS)
    --container-image=IMG   the image
    --job-name=NAME, -J     the run's name (default: the file's name without its suffix)

The script runs as ``INTERPRETER -c SCRIPT`` (the ``#!`` line's interpreter, else ``/bin/sh``).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from .runspec.quantities import parse_bytes, parse_duration

__all__ = ["SubmitError", "run_document", "sbatch_document", "with_cli_defaults"]


class SubmitError(ValueError):
    """A flag or directive that cannot become a run spec; the message names it."""


def _quantity(parse, value: str, what: str) -> int:
    try:
        return parse(value)
    except (TypeError, ValueError):
        raise SubmitError(f"{what}: '{value}' is not valid") from None


def run_document(
    name: str,
    image: str | None,
    command: list[str],
    *,
    gpus: int | None = None,
    cpus: int | None = None,
    mem: str | None = None,
    time: str | None = None,
    defaults: bool = True,
) -> dict[str, Any]:
    """``astra astraeus run``'s run spec. With GPUs, ``cpus`` and ``mem`` are per GPU. Without
    ``defaults``, only the flags given (no start policy, no restart policy)."""
    resources: dict[str, Any] = {}
    memory = _quantity(parse_bytes, mem, "--mem") if mem is not None else None
    if gpus:
        resources["gpu_requests"] = {"count": gpus}
        per: dict[str, Any] = {}
        if cpus is not None:
            per["cpu_cores"] = cpus
        if memory is not None:
            per["memory_bytes"] = memory
        if per:
            resources["per_gpu"] = per
    else:
        if cpus is not None:
            resources["cpu_cores"] = cpus
        if memory is not None:
            resources["memory_bytes"] = memory
    template: dict[str, Any] = {"image": image} if image is not None else {}
    if defaults:
        template["restart_policy"] = "Never"
    if command:
        template["command"] = command[0]
        if command[1:]:
            template["args"] = list(command[1:])
    if resources:
        template["requested_resources"] = resources
    if time is not None:
        template["time_limit_seconds"] = _quantity(parse_duration, time, "--time")
    if defaults:
        return {"metadata": {"name": name}, "spec": {"start": "Independent", "task_template": template}}
    return {"metadata": {"name": name}, "spec": {"task_template": template} if template else {}}


def with_cli_defaults(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with the seeds' CLI defaults where it says nothing: workers start independently,
    and a failed one is not restarted (``restart_policy: Never``). A template's own start (a gang)
    or restart policy is kept."""
    spec = doc.setdefault("spec", {})
    if "start" not in spec and "policy" not in spec:
        spec["start"] = "Independent"
    if isinstance(spec.get("task_template"), dict):
        spec["task_template"].setdefault("restart_policy", "Never")
    return doc


_KNOWN = {"array", "gres", "cpus-per-task", "mem", "time", "container-image", "job-name"}
_SHORT = {"-J": "job-name", "-c": "cpus-per-task", "-t": "time", "-a": "array"}


def _slurm_time(value: str) -> int:
    if value.isdigit():  # Slurm: a bare number is minutes
        return int(value) * 60
    return _quantity(parse_duration, value, "--time")


def _slurm_mem(value: str) -> int:
    m = re.fullmatch(r"(\d+)([KMGT]?)B?", value.upper())
    if not m:
        raise SubmitError(f"--mem: '{value}' is not valid (Slurm sizes: 4000, 500M, 32G)")
    unit = m.group(2) or "M"
    return _quantity(parse_bytes, f"{m.group(1)}{unit}i", "--mem")


def _directives(text: str, file: str) -> tuple[list[tuple[int, str, str]], str]:
    """(line, key, value) of each #SBATCH directive before the first command; the interpreter."""
    out = []
    interpreter = "/bin/sh"
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if number == 1 and stripped.startswith("#!"):
            interpreter = stripped[2:].strip().split()[0] if stripped[2:].strip() else interpreter
            continue
        if not stripped or (stripped.startswith("#") and not stripped.startswith("#SBATCH")):
            continue
        if not stripped.startswith("#SBATCH"):
            break  # Slurm stops reading directives at the first command
        words = shlex.split(stripped[len("#SBATCH") :], comments=False)
        i = 0
        while i < len(words):
            word = words[i]
            if word.startswith("#"):
                break
            if word.startswith("--"):
                key, eq, value = word[2:].partition("=")
                if not eq:
                    if i + 1 >= len(words):
                        raise SubmitError(f"{file}:{number}: #SBATCH --{key} needs a value")
                    value = words[i + 1]
                    i += 1
            elif word in _SHORT:
                key = _SHORT[word]
                if i + 1 >= len(words):
                    raise SubmitError(f"{file}:{number}: #SBATCH {word} needs a value")
                value = words[i + 1]
                i += 1
            else:
                raise SubmitError(f"{file}:{number}: unknown #SBATCH directive '{word}'")
            if key not in _KNOWN:
                raise SubmitError(
                    f"{file}:{number}: unknown #SBATCH directive '--{key}' (astra reads --array, --gres, "
                    "--cpus-per-task, --mem, --time, --container-image, --job-name)"
                )
            out.append((number, key, value))
            i += 1
    return out, interpreter


def sbatch_document(text: str, file: str, default_name: str) -> dict[str, Any]:
    """A batch script as a run spec; ``SubmitError`` (with ``FILE:LINE``) for what cannot be one.

    Over 60 lines: one branch per ``#SBATCH`` option it reads, each with its own words; a table of small
    functions would only scatter them."""
    directives, interpreter = _directives(text, file)
    name = default_name
    image = None
    resources: dict[str, Any] = {}
    template: dict[str, Any] = {}
    spec: dict[str, Any] = {}
    for number, key, value in directives:
        where = f"{file}:{number}: --{key}"
        if key == "array":
            m = re.fullmatch(r"(\d+)-(\d+)(?:%(\d+))?", value)
            if not m or int(m.group(1)) != 0:
                raise SubmitError(
                    f"{where}: '{value}' is not supported: an array's indices are 0 to N-1 in steps of 1 "
                    "(--array=0-99%8)"
                )
            spec["array"] = {"size": int(m.group(2)) + 1}
            if m.group(3) is not None:
                spec["array"]["max_parallel"] = int(m.group(3))
        elif key == "gres":
            m = re.fullmatch(r"gpu(?::([A-Za-z0-9_.-]+))?:(\d+)", value)
            if not m:
                raise SubmitError(f"{where}: '{value}' is not supported (--gres=gpu:N or gpu:MODEL:N)")
            gr: dict[str, Any] = {"count": int(m.group(2))}
            if m.group(1):
                gr["models"] = [m.group(1)]
            resources["gpu_requests"] = gr
        elif key == "cpus-per-task":
            if not value.isdigit() or int(value) < 1:
                raise SubmitError(f"{where}: '{value}' is not a whole number of at least 1")
            resources["cpu_cores"] = int(value)
        elif key == "mem":
            try:
                resources["memory_bytes"] = _slurm_mem(value)
            except SubmitError as exc:
                raise SubmitError(f"{file}:{number}: {exc}") from None
        elif key == "time":
            try:
                template["time_limit_seconds"] = _slurm_time(value)
            except SubmitError as exc:
                raise SubmitError(f"{file}:{number}: {exc}") from None
        elif key == "container-image":
            image = value
        elif key == "job-name":
            name = value
    if image is None:
        raise SubmitError(
            f"{file}: no #SBATCH --container-image: a run needs an image (the script runs in it)"
        )
    body = {
        "image": image,
        "command": interpreter,
        "args": ["-c", text],
        "restart_policy": "Never",
        **template,
    }
    if resources:
        body["requested_resources"] = resources
    spec["task_template"] = body
    return {"metadata": {"name": name}, "spec": spec}
