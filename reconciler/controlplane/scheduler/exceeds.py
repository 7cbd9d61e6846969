"""A worker that asks one machine for more cores or memory than the largest machine has.

Owns: ``exceeds(inventory, run, tt)``: the words that name the resource (``cpu_cores``,
``memory_bytes``, ``per_gpu.cpu_cores``, ``per_gpu.memory_bytes``), what was asked as the spec
says it (for each worker, or per GPU: ``memory_bytes 900Ti for each worker``), and the largest
machine's (``the largest machine has 2Ti of memory``), as the GPU count's refusal says its own.
A run's top-level cores and memory are each worker's (the seeds: CPU and memory follow the GPUs
with ``per_gpu``, so the total fits whatever shape is chosen); a worker holds at least one GPU
(``min_per_machine``, or its share of ``machines``, or an array copy's or group worker's count).

Must not touch: the records, the free room of the moment (the verdict is on the empty cluster),
clocks, I/O.
"""

from __future__ import annotations

from reconciler.runspec.models import Run, TaskTemplate

from ..inventory import Inventory
from .placement import Net

__all__ = ["exceeds", "size_words", "with_largest_group"]

_UNITS = ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki")


def size_words(n: int) -> str:
    """Bytes as a spec writes them: the largest binary unit that divides them (``900Ti``)."""
    for i, unit in enumerate(_UNITS):
        scale = 1024 ** (len(_UNITS) - i)
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def _gpus_on_one(run: Run, tt: TaskTemplate) -> int:
    """The fewest GPUs one worker of ``tt`` holds on its machine."""
    res = tt.requested_resources
    gr = res.gpu_requests if res else None
    if res is None or gr is None or not gr.count:
        return 0
    if run.spec.array is not None or run.spec.task_groups is not None:
        return gr.count
    if res.machines:
        return max(gr.count // res.machines, 1)
    return max(gr.min_per_machine or 1, 1)


def exceeds(inventory: Inventory, run: Run, tt: TaskTemplate) -> str | None:
    """Why one worker of ``tt`` needs more cores or memory than any machine has, or ``None``."""
    res = tt.requested_resources
    if res is None:
        return None
    g = _gpus_on_one(run, tt)
    per = res.per_gpu
    if not len(inventory):
        return None
    cores, memory = _largest(inventory)
    each, per_cores = res.cpu_cores or 0, (per.cpu_cores or 0) if per else 0
    per_mem = (per.memory_bytes or 0) if per else 0
    mem_each = res.memory_bytes or 0
    if each > cores:
        return f"cpu_cores {each} for each worker, but the largest machine has {cores} cores"
    if each + per_cores * g > cores:
        return _per_gpu(
            "per_gpu.cpu_cores", str(per_cores), g, f"{each + per_cores * g} cores", f"{cores} cores"
        )
    if mem_each > memory:
        asked, largest = size_words(mem_each), size_words(memory)
        return f"memory_bytes {asked} for each worker, but the largest machine has {largest} of memory"
    if mem_each + per_mem * g > memory:
        need = size_words(mem_each + per_mem * g)
        return _per_gpu(
            "per_gpu.memory_bytes", size_words(per_mem), g, f"{need} of memory", f"{size_words(memory)}"
        )
    return None


#: Each inventory's largest cores and memory, by identity (the inventory kept, so its id holds):
#: a queue of 10,000 runs looks at the machines once.
_KNOWN: dict[int, tuple[Inventory, int, int]] = {}


def _largest(inventory: Inventory) -> tuple[int, int]:
    known = _KNOWN.get(id(inventory))
    if known is None or known[0] is not inventory:
        if len(_KNOWN) > 16:
            _KNOWN.clear()
        cores = max(m.cpu_cores for m in inventory)
        memory = max(m.memory_bytes for m in inventory)
        known = _KNOWN[id(inventory)] = (inventory, cores, memory)
    return known[1], known[2]


def with_largest_group(why: str | None, inventory: Inventory, run: Run) -> str | None:
    """A network refusal (``topology.keep_within rack but no rack can hold 40 GPUs``) with the
    largest group's GPUs: ``; the largest rack has 32``. Other words, as they are."""
    if why is None or not why.startswith(("topology.keep_within ", "network.interconnect ")):
        return why
    net = Net.of(run)
    largest = max((sum(m.gpus for m in group) for _, group in net.groups(inventory)), default=0)
    spec = run.spec
    what: str
    if spec.topology and spec.topology.keep_within:
        what = str(spec.topology.keep_within)
    else:
        what = f"{spec.network.interconnect if spec.network else ''} network"
    return f"{why}; the largest {what} has {largest}" if largest else f"{why}; this cluster has no {what}"


def _per_gpu(field: str, asked: str, gpus: int, need: str, largest: str) -> str:
    on = "its GPU" if gpus == 1 else f"its {gpus} GPUs"
    return f"{field} {asked} per GPU: {need} on one machine for {on}, but the largest machine has {largest}"
