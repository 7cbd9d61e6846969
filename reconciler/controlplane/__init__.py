"""The embedded Astraeus control plane.

So far: the machine inventory, the pure scheduler, clocks, and a simulation that drives the
scheduler in simulated time. The store (sqlmodel), the process executor and the REST API come
later and sit around these types; nothing here does I/O.

Must not touch: the reconciler's ``plan``/``apply``/``clusters`` (they reach a control plane only
through the ``Cluster`` protocol), and nothing here imports them.
"""

from .clock import Clock, ManualClock, SystemClock
from .inventory import Inventory, InventoryError, Machine, default_inventory, load_inventory
from .scheduler import (
    ClusterState,
    Decision,
    Observation,
    RunRecord,
    RunState,
    WorkerRecord,
    WorkerState,
    plan_tick,
    schedule,
    worker_env,
)
from .simulation import Outcome, Simulation

__all__ = [
    "Clock",
    "ClusterState",
    "Decision",
    "Inventory",
    "InventoryError",
    "Machine",
    "ManualClock",
    "Observation",
    "Outcome",
    "RunRecord",
    "RunState",
    "Simulation",
    "SystemClock",
    "WorkerRecord",
    "WorkerState",
    "default_inventory",
    "load_inventory",
    "plan_tick",
    "schedule",
    "worker_env",
]
