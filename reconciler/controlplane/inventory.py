"""The machines the embedded control plane schedules onto: plain, frozen data.

Owns: ``Machine`` and ``Inventory`` (what each machine has and where it sits in the network),
``default_inventory()`` (the laptop cluster ``astra server`` starts with) and
``load_inventory(mapping)`` (an inventory from a plain mapping; YAML is parsed elsewhere).

Must not touch: files, the store, the clock, the scheduler's state. Which GPUs are in use is the
scheduler's to know; an inventory only says what exists.

Network levels, fastest first (the seeds' order for choosing a shape)::

    one machine  >  nvlink_domain  >  fabric (InfiniBand)  >  rdma_network  >  rack  >  ethernet

A machine with ``fabric=None`` or ``rdma_network=None`` is on no such network.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from reconciler.runspec.quantities import parse_bytes

__all__ = ["GIB", "TIB", "Inventory", "InventoryError", "Machine", "default_inventory", "load_inventory"]

GIB = 1024**3
TIB = 1024**4


class InventoryError(ValueError):
    """An inventory mapping that does not describe machines; the message names the field."""


@dataclass(frozen=True, slots=True)
class Machine:
    """One machine: its GPUs, CPU cores and memory, and where it sits in the network."""

    name: str
    gpus: int = 8
    gpu_model: str = "H100"
    gpu_memory_gb: float = 80.0
    #: GPUs passing their health checks; ``None`` means all of them.
    healthy_gpus: int | None = None
    cpu_cores: int = 128
    memory_bytes: int = 2 * TIB
    nvlink_domain: str | None = None
    #: The InfiniBand fabric the machine is on.
    fabric: str | None = None
    rack: str | None = None
    rdma_network: str | None = None

    @property
    def healthy(self) -> int:
        """How many GPUs pass their health checks."""
        return self.gpus if self.healthy_gpus is None else min(self.healthy_gpus, self.gpus)


@dataclass(frozen=True, slots=True)
class Inventory:
    """Every machine of the cluster, by name, in a fixed order."""

    machines: tuple[Machine, ...]
    _by_name: dict[str, Machine] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name = {m.name: m for m in self.machines}
        if len(by_name) != len(self.machines):
            raise InventoryError("machine names must be unique")
        object.__setattr__(self, "_by_name", by_name)

    def __getitem__(self, name: str) -> Machine:
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __len__(self) -> int:
        return len(self.machines)

    def __iter__(self):
        return iter(self.machines)

    @property
    def largest_gpus(self) -> int:
        return max((m.gpus for m in self.machines), default=0)

    @property
    def total_gpus(self) -> int:
        return sum(m.gpus for m in self.machines)


def default_inventory(
    racks: int = 4,
    machines_per_rack: int = 4,
    gpus: int = 8,
    *,
    machines_per_nvlink_domain: int = 2,
    racks_per_rdma_network: int = 2,
) -> Inventory:
    """A cluster of ``racks × machines_per_rack`` H100 machines named gpu-01, gpu-02, …

    Each machine: 8 × H100 80 GB, 128 cores, 2 TiB. NVLink domains span two neighbouring machines,
    each rack has its own InfiniBand fabric, and a RoCE (RDMA) network spans two racks. The seeds'
    llama-ft (16 GPUs, 12 cores and 120 GiB per GPU) fits one NVLink domain; the sweep (100 × one
    GPU, 8 cores, 32 GiB) fits eight copies per machine.
    """
    out: list[Machine] = []
    width = max(2, len(str(racks * machines_per_rack)))
    for r in range(racks):
        for i in range(machines_per_rack):
            n = r * machines_per_rack + i + 1
            out.append(
                Machine(
                    name=f"gpu-{n:0{width}d}",
                    gpus=gpus,
                    nvlink_domain=f"nvl-{r + 1}-{i // machines_per_nvlink_domain + 1}",
                    fabric=f"ib-{r + 1}",
                    rack=f"rack-{r + 1}",
                    rdma_network=f"roce-{r // racks_per_rdma_network + 1}",
                )
            )
    return Inventory(tuple(out))


_FIELDS = {f.name for f in fields(Machine)}
_INTS = ("gpus", "healthy_gpus", "cpu_cores")


def _machine(raw: Any, where: str, defaults: Mapping[str, Any]) -> Machine:
    if not isinstance(raw, Mapping):
        raise InventoryError(f"{where}: must be a mapping of machine fields")
    data = {**defaults, **raw}
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise InventoryError(f"{where}.{unknown[0]}: unknown field '{unknown[0]}'")
    if not isinstance(data.get("name"), str) or not data["name"]:
        raise InventoryError(f"{where}.name: a machine needs a name")
    for key in _INTS:
        value = data.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise InventoryError(f"{where}.{key}: must be a whole number of at least 0")
    if "memory_bytes" in data:
        try:
            data["memory_bytes"] = parse_bytes(data["memory_bytes"])
        except (TypeError, ValueError) as exc:
            raise InventoryError(f"{where}.memory_bytes: must be a size such as 2Ti") from exc
    if "gpu_memory_gb" in data:
        value = data["gpu_memory_gb"]
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise InventoryError(f"{where}.gpu_memory_gb: must be a number of at least 0")
    return Machine(**data)


def load_inventory(data: Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> Inventory:
    """An ``Inventory`` from ``{"defaults": {...}, "machines": [{...}, ...]}`` (or a bare list).

    ``defaults`` fills any field a machine leaves out; memory takes friendly sizes (``2Ti``).
    Raises ``InventoryError`` naming the offending field (``machines[3].gpus: …``).
    """
    defaults: Mapping[str, Any] = {}
    if isinstance(data, Mapping):
        unknown = sorted(set(data) - {"defaults", "machines"})
        if unknown:
            raise InventoryError(f"{unknown[0]}: unknown field '{unknown[0]}'")
        defaults = data.get("defaults") or {}
        if not isinstance(defaults, Mapping):
            raise InventoryError("defaults: must be a mapping of machine fields")
        raw = data.get("machines")
    else:
        raw = list(data)
    if not isinstance(raw, list) or not raw:
        raise InventoryError("machines: an inventory needs a list of at least one machine")
    return Inventory(tuple(_machine(m, f"machines[{i}]", defaults) for i, m in enumerate(raw)))
