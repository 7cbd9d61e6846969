"""Network groups: where the workers of a run with ``network.interconnect`` or ``topology.keep_within`` go.

Owns the rule and the choice:

* The rule. The workers of a run that hold places at the same time are on one machine, or all
  within one *group*: machines that share a known NVLink domain, InfiniBand fabric or RDMA
  network (at a level the run's ``interconnect`` allows; any level, Ethernet too, without one),
  and a known ``keep_within`` key (rack, fabric or NVLink domain). A machine with no fabric (or
  no rack) is in no fabric (or rack): two missing levels never compare equal. One machine alone
  satisfies every constraint: nothing leaves it.
* The candidates (``feasible``): the groups that could hold the whole run on the empty cluster
  (one copy, for an array: its copies are alike and come and go), fastest level first. The
  inventory alone decides them, so they are kept with the state (``ClusterState.netgroups``).
* The choice (``choose``), made for the whole run before its first worker is placed: the first
  candidate where every waiting worker fits now; else the one where the most of them fit; else
  (nothing fits anywhere now) any candidate, whichever gets room first.
* While some of its workers hold places (``containing``), the next ones go only into candidates
  that hold every placed one: the run never ends up split over groups, nor in a group that could
  not hold it (rack r1 = {a1} is never chosen for two workers while rack r2 = {a2, a3} can hold
  both).

A run whose workers no candidate could ever hold is refused at admission, in words (``refusal``).
A run whose shape is chosen when it is placed (``placement.shape``) is placed whole into one
group by its search; the rule above then holds its restarted workers to the groups holding it.

Must not touch: the records (it returns groups; the queue places), the order runs are served in,
clocks, I/O. Every answer depends on the inventory, the view and the run only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice

from reconciler.runspec.models import Spec

from ..inventory import Machine
from .placement import Net, View, assign
from .records import HOLDING, Ask, RunRecord
from .state import ClusterState

__all__ = [
    "NetGroup",
    "choose",
    "containing",
    "feasible",
    "placed_machines",
    "refusal",
    "region",
    "union",
    "waiting_asks",
    "whole_run",
]


@dataclass(frozen=True, slots=True, eq=False)
class NetGroup:
    """One group of machines a run may keep within: its level and its machines, in inventory order.

    Compared and hashed by identity: the groups of one inventory are made once (``feasible``).
    """

    level: str
    machines: tuple[Machine, ...]
    names: frozenset[str]

    def __iter__(self) -> Iterator[Machine]:
        return iter(self.machines)


def whole_run(s: ClusterState, r: RunRecord) -> tuple[tuple[Ask, ...], bool]:
    """What a candidate must hold of ``r``: its workers' asks (an array: one copy's), and whether
    they need a machine each (not an array's copies, not a run of task groups)."""
    spec = r.run.spec
    names = s.run_workers[r.name]
    if spec.array is not None:
        return (s.workers[names[0]].ask,), False
    return tuple(s.workers[n].ask for n in names), spec.task_groups is None


def feasible(s: ClusterState, asks: tuple[Ask, ...], net: Net, distinct: bool) -> tuple[NetGroup, ...]:
    """The groups that could hold ``asks`` together on the empty cluster, fastest level first.

    One machine alone first, where the workers may share one (or there is one worker); then the
    groups of ``net``'s levels. Kept with the state, per ask, constraint and ``distinct``.
    """
    key = (asks, net, distinct)
    got = s.netgroups.get(key)
    if got is not None:
        return got
    empty = View(s, empty=True)
    order = [(str(i), a) for i, a in sorted(enumerate(asks), key=lambda x: -x[1].gpus)]
    out: list[NetGroup] = []
    singles = not distinct or len(asks) == 1
    if singles:
        for m in s.inventory:
            if assign(empty, (m,), order, distinct) is not None:
                out.append(NetGroup("machine", (m,), frozenset((m.name,))))
    seen: set[frozenset[str]] = set()
    for level, ms in net.groups(s.inventory):
        names = frozenset(m.name for m in ms)
        if names in seen or (singles and len(ms) == 1):
            continue
        seen.add(names)
        if assign(empty, ms, order, distinct) is not None:
            out.append(NetGroup(level, tuple(ms), names))
    got = s.netgroups[key] = tuple(out)
    return got


def placed_machines(s: ClusterState, run: str, this_tick: Iterable[tuple[str, str]]) -> set[str]:
    """The machines ``run``'s workers hold: in the state, and placed this tick (``Tick.placed``)."""
    out = {s.workers[n].machine or "" for n in s.run_workers[run] if s.workers[n].state in HOLDING}
    out.update(m for r, m in this_tick if r == run)
    out.discard("")
    return out


def containing(groups: Iterable[NetGroup], machines: set[str]) -> tuple[NetGroup, ...]:
    """The groups that hold every one of ``machines``."""
    return tuple(g for g in groups if machines <= g.names)


def choose(view: View, groups: tuple[NetGroup, ...], asks: list[Ask], distinct: bool) -> tuple[NetGroup, ...]:
    """The group a run with nothing placed starts in (one), or every candidate when none has room.

    The first of ``groups`` where all of ``asks`` (its waiting workers) fit now; else the one
    where the most of them fit; else all of them: nothing fits now, and the first group to get
    room (or to be made room in, by preemption) is as good as any.
    """
    order = [(str(i), a) for i, a in sorted(enumerate(asks), key=lambda x: -x[1].gpus)]
    best: tuple[int, NetGroup] | None = None
    for g in groups:
        got = assign(view, g, order, distinct, partial=True)
        n = len(got or ())
        if n == len(order):
            return (g,)
        if n and (best is None or n > best[0]):
            best = (n, g)
    return (best[1],) if best is not None else groups


def waiting_asks(s: ClusterState, r: RunRecord, cap: int | None) -> list[Ask]:
    """The asks of ``r``'s waiting workers (an array's: as many as its cap lets hold places)."""
    pending = s.pending[r.name]
    return [s.workers[n].ask for n in islice(pending, cap if cap is not None else len(pending))]


def refusal(spec: Spec, asks: tuple[Ask, ...]) -> str:
    """Why no group could ever hold the run, in words: its constraint, and what it asks."""
    gpus = sum(a.gpus for a in asks)
    what = f"{gpus} GPUs" if gpus else f"its {len(asks)} workers"
    if spec.topology and spec.topology.keep_within:
        within = spec.topology.keep_within
        return f"topology.keep_within {within} but no {within} can hold {what}"
    assert spec.network is not None and spec.network.interconnect
    net_name = spec.network.interconnect
    return f"network.interconnect {net_name} but no {net_name} network can hold {what}"


def region(
    s: ClusterState, view: View, r: RunRecord, net: Net, this_tick: Iterable[tuple[str, str]], cap: int | None
) -> tuple[tuple[NetGroup, ...], tuple[NetGroup, ...]]:
    """Every candidate of ``r``, and those its next workers may go into: the ones holding every
    placed worker, or (nothing placed) the one chosen for the whole run now (``choose``)."""
    asks, distinct = whole_run(s, r)
    every = feasible(s, asks, net, distinct)
    placed = placed_machines(s, r.name, this_tick)
    if placed:
        return every, containing(every, placed)
    return every, choose(view, every, waiting_asks(s, r, cap), distinct)


def union(groups: Iterable[NetGroup]) -> frozenset[str]:
    """The machines of ``groups``, by name."""
    return frozenset().union(*(g.names for g in groups))
