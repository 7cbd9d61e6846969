"""Placement: where workers fit, over the free capacity a tick sees and the network levels.

Owns: the network levels (machine, NVLink domain, InfiniBand fabric, RDMA network, rack,
Ethernet) and a run's constraints over them (``Net``); ``View``, free capacity with a tick's own
changes laid over the state's; ``shape``, the fewest machines on the best network for a run
whose shape is chosen when it is placed; ``fixed``, machines for known workers placed together;
``Memo``, what one tick learns once and reuses; ``label``, an ask's GPU models in words.

Must not touch: the records (a placement is returned as ``PlaceWorker`` decisions, never written),
the order runs are served in, clocks, I/O. Every answer depends on the view and the ask only.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.runspec.models import Run

from ..inventory import Machine
from .records import Ask, Free, NewWorker, PlaceWorker, WorkerRecord
from .state import ClusterState

__all__ = [
    "KEEP_ATTR",
    "KEEP_LEVEL",
    "LEVELS",
    "SLOWEST_LEVEL",
    "Memo",
    "Net",
    "View",
    "assign",
    "fixed",
    "groups_of",
    "label",
    "machines_of",
    "place_decision",
    "search",
    "shape",
    "split",
]

#: The scheduler package, whose ``_shape`` every search for room is called through (``search``).
_PACKAGE = __name__.rpartition(".")[0]

# Network levels, fastest first: (name, the machine attribute grouping it).
LEVELS: tuple[tuple[str, str | None], ...] = (
    ("machine", None),
    ("nvlink", "nvlink_domain"),
    ("infiniband", "fabric"),
    ("rdma", "rdma_network"),
    ("rack", "rack"),
    ("ethernet", None),
)
SLOWEST_LEVEL = {"nvlink": 1, "infiniband": 2, "rdma": 3, "ethernet": 5}
KEEP_ATTR = {"nvlink_domain": "nvlink_domain", "fabric": "fabric", "rack": "rack"}
KEEP_LEVEL = {"nvlink_domain": 1, "fabric": 2, "rack": 5}


class View:
    """Free capacity as the tick sees it: the state's, with this tick's changes laid over.

    ``version`` counts its changes (``take`` and ``give``), ``gives`` only the ones that free
    room: a placement that failed stays failed while ``gives`` has not moved (see ``Memo``).
    """

    __slots__ = ("_counted", "_healthy", "_unhealthy", "empty", "gives", "over", "s", "version")

    def __init__(self, state: ClusterState, empty: bool = False) -> None:
        self.s, self.empty = state, empty
        self.over: dict[str, Free] = {}
        self.version = self.gives = 0
        #: Free GPUs over the usable machines, healthy and not, once counted (``free_gpus``).
        self._counted = False
        self._healthy = self._unhealthy = 0

    def free_gpus(self, healthy_only: bool) -> int:
        """Free GPUs on every usable machine (healthy ones only, or all): a bound on any placement."""
        if not self._counted:
            healthy = unhealthy = 0
            for name in self.s.machines:
                if self.usable(name):
                    f = self.free(name)
                    healthy += f.healthy_gpus
                    unhealthy += f.unhealthy_gpus
            self._healthy, self._unhealthy, self._counted = healthy, unhealthy, True
        return self._healthy if healthy_only else self._healthy + self._unhealthy

    def _count(self, name: str, gh: int, gu: int) -> None:
        self.version += 1
        if self._counted and self.usable(name):
            self._healthy += gh
            self._unhealthy += gu

    def free(self, name: str) -> Free:
        """What ``name`` has free as the tick sees it (never changed in place: ``take`` and
        ``give`` lay a changed copy over it)."""
        f = self.over.get(name)
        if f is not None:
            return f
        if self.empty:
            return Free.of(self.s.machines[name])
        return self.s.free[name]

    def usable(self, name: str) -> bool:
        """Whether new workers may go on the machine: not lost, and reporting (always, if empty)."""
        return self.empty or name not in self.s.unusable

    def cap(self, m: Machine, ask: Ask) -> int:
        """The most GPUs of this ask that fit on ``m`` now."""
        if not self.usable(m.name) or not ask.eligible(m):
            return 0
        f = self.free(m.name)
        g = f.healthy_gpus if ask.healthy_only else f.healthy_gpus + f.unhealthy_gpus
        cores = f.cpu_cores - ask.cpu_cores
        mem = f.memory_bytes - ask.memory_bytes
        if cores < 0 or mem < 0:
            return 0
        if ask.cpu_per_gpu:
            g = min(g, cores // ask.cpu_per_gpu)
        if ask.memory_per_gpu:
            g = min(g, mem // ask.memory_per_gpu)
        return max(g, 0)

    def fits(self, m: Machine, ask: Ask, gpus: int) -> bool:
        if not self.usable(m.name) or not ask.eligible(m):
            return False
        f = self.free(m.name)
        g = f.healthy_gpus if ask.healthy_only else f.healthy_gpus + f.unhealthy_gpus
        return g >= gpus and f.cpu_cores >= ask.cores(gpus) and f.memory_bytes >= ask.memory(gpus)

    def take(self, name: str, ask: Ask, gpus: int) -> tuple[int, int, int, int]:
        f = self.free(name).copy()
        gu = 0 if ask.healthy_only else min(f.unhealthy_gpus, gpus)
        gh = gpus - gu
        cores, mem = ask.cores(gpus), ask.memory(gpus)
        f.take(gh, gu, cores, mem)
        self.over[name] = f
        self._count(name, -gh, -gu)
        return gu, cores, mem, gh

    def give(self, w: WorkerRecord) -> None:
        assert w.machine is not None
        f = self.free(w.machine).copy()
        f.take(w.unhealthy_gpus - w.gpus, -w.unhealthy_gpus, -w.cpu_cores, -w.memory_bytes)
        self.over[w.machine] = f
        self.gives += 1
        self._count(w.machine, w.gpus - w.unhealthy_gpus, w.unhealthy_gpus)

    def candidates(self, gpus: int) -> Iterator[Machine]:
        """Machines with at least ``gpus`` free GPUs, fullest first (best fit)."""
        s = self.s
        if self.empty:
            yield from s.inventory
            return
        for g in range(min(gpus, s.max_gpus + 1), s.max_gpus + 1):
            for name in list(s.buckets[g]):
                yield s.machines[name]
        # machines this tick freed (preemption) may sit in lower buckets than their room
        for name in list(self.over):
            if self.over[name].gpus > s.free[name].gpus:
                yield s.machines[name]


@dataclass(frozen=True, slots=True)
class Net:
    """The network constraints of a run: the slowest level allowed and a grouping to keep within."""

    slowest: int = 5
    keep: str | None = None

    @staticmethod
    def of(run: Run) -> Net:
        spec = run.spec
        slowest, keep = 5, None
        if spec.network and spec.network.interconnect:
            slowest = SLOWEST_LEVEL[spec.network.interconnect]
        if spec.topology and spec.topology.keep_within:
            keep = KEEP_ATTR[spec.topology.keep_within]
            slowest = min(slowest, KEEP_LEVEL[spec.topology.keep_within])
        return Net(slowest, keep)

    def groups(self, machines: Iterable[Machine]) -> Iterator[tuple[str, list[Machine]]]:
        """Groups of machines for each allowed level, fastest level first."""
        ms = list(machines)
        for level, (name, attr) in enumerate(LEVELS):
            if level > self.slowest or level == 0:
                continue
            out: dict[tuple, list[Machine]] = {}
            for m in ms:
                key = getattr(m, attr) if attr else ""
                if key is None:
                    continue
                kk = getattr(m, self.keep) if self.keep else ""
                if kk is None:
                    continue
                out.setdefault((key, kk), []).append(m)
            for group in out.values():
                yield name, group

    @property
    def constrained(self) -> bool:
        """Whether the run must keep to one network group (``netgroups``); else it may go anywhere."""
        return self.slowest < 5 or self.keep is not None


def shape(
    view: View, ask: Ask, count: int, k_min: int, net: Net, memo: Memo | None = None
) -> list[tuple[Machine, int]] | None:
    """The fewest machines on the best network with room for ``count`` GPUs; one worker each.

    One machine if any can hold it all (the fullest that can); else, at the fastest network level
    where a group can, the group needing the fewest machines and leaving the least room unused.
    ``memo`` (a tick's) keeps the grouping of machines between calls; the answer is the same.
    """
    best = None
    if count >= k_min:
        # only machines with ``count`` free GPUs can hold it: the buckets give them (or, on an
        # empty view, every machine); the fullest wins, so the order they come in does not matter
        ms = view.s.inventory if view.empty else view.candidates(count)
        for m in ms:
            if view.fits(m, ask, count):
                key = (view.free(m.name).gpus, m.name)
                if best is None or key < best[0]:
                    best = (key, [(m, count)])
    if best:
        return best[1]
    groups = memo.groups(view, ask, net) if memo is not None else groups_of(view, ask, net)
    level_found = None
    for level, group in groups:
        if level_found is not None and level != level_found:
            break
        caps = sorted(((view.cap(m, ask), m.name, m) for m in group), key=lambda c: (-c[0], c[1]))
        caps = [c for c in caps if c[0] >= k_min and c[0] > 0]
        total, k = 0, 0
        for c in caps:
            total += c[0]
            k += 1
            if total >= count:
                break
        if total < count or k * k_min > count:
            continue
        key = (k, sum(c for c, _, _ in caps[:k]) - count)
        if best is None or key < best[0]:
            best = (key, split(caps, k, count, k_min))
            level_found = level
            if key == (2, 0):
                # no machine holds it alone (else it was chosen above), so nothing beats two
                # machines with no room left over: a later group would need a smaller key
                break
    return best[1] if best else None


def search(
    view: View, ask: Ask, count: int, k_min: int, net: Net, memo: Memo | None = None
) -> list[tuple[Machine, int]] | None:
    """``shape``, called by the name the package gives it (``scheduler._shape``).

    Every search for room goes through here, so that replacing ``scheduler._shape`` (as the test
    that counts a tick's searches does, tests/controlplane/test_placement.py) sees each one.
    """
    return sys.modules[_PACKAGE]._shape(view, ask, count, k_min, net, memo)


def groups_of(view: View, ask: Ask, net: Net) -> list[tuple[str, list[Machine]]]:
    """The groups of usable machines eligible for ``ask``, each allowed level, fastest first."""
    machines = [m for m in view.s.inventory if view.usable(m.name) and ask.eligible(m)]
    return list(net.groups(machines))


class Memo:
    """What one tick learns once and reuses, none of it changing an answer.

    * the grouping of machines by network level, per eligibility and network constraint (the
      machines that are usable and eligible do not change within a tick);
    * admission's verdicts on an empty cluster (``shape``), per ask and constraint;
    * the asks that found no room: a ``shape`` that failed fails again while no room has been
      freed since (taking room only lowers every machine's capacity, and a shape that fits with
      less room fits with more); a ``fixed`` that failed, while the view has not changed at all.
    """

    def __init__(self) -> None:
        self._groups: dict[tuple, list[tuple[str, list[Machine]]]] = {}
        self.empty_shapes: dict[tuple, bool] = {}
        self._no_room: dict[tuple, tuple[int, int]] = {}

    def groups(self, view: View, ask: Ask, net: Net) -> list[tuple[str, list[Machine]]]:
        key = (view.empty, bool(ask.gpus), ask.models, ask.min_memory_gb, net)
        got = self._groups.get(key)
        if got is None:
            got = self._groups[key] = groups_of(view, ask, net)
        return got

    def shape(
        self, view: View, ask: Ask, count: int, k_min: int, net: Net
    ) -> list[tuple[Machine, int]] | None:
        """``shape(view, ...)``, skipping one bound to fail: too few free GPUs, or failed already."""
        if count > view.free_gpus(ask.healthy_only):
            return None
        key = ("shape", ask, count, k_min, net)
        if self._no_room.get(key, (-1, -1))[0] == view.gives:
            return None
        got = search(view, ask, count, k_min, net, self)
        if got is None:
            self._no_room[key] = (view.gives, view.version)
        return got

    def fixed(
        self,
        view: View,
        asks: list[tuple[str, Ask]],
        net: Net,
        distinct: bool,
        within: tuple[Any, ...] | None = None,
    ) -> list[tuple[str, Machine]] | None:
        """``fixed(view, ...)``, skipping one bound to fail: too few free GPUs, or failed already."""
        need = sum(a.gpus for _, a in asks)
        if need > view.free_gpus(all(a.healthy_only for _, a in asks)):
            return None
        key = ("fixed", tuple(a for _, a in asks), net, distinct, within)
        if self._no_room.get(key, (-1, -1))[1] == view.version:
            return None
        got = fixed(view, asks, net, distinct, within)
        if got is None:
            self._no_room[key] = (view.gives, view.version)
        return got


def split(caps: list[tuple[int, str, Machine]], k: int, count: int, k_min: int) -> list[tuple[Machine, int]]:
    if count % k == 0:
        share = count // k
        fitting = [c for c in caps if c[0] >= share]
        if len(fitting) >= k:
            fitting.sort(key=lambda c: (c[0], c[1]))  # pack: the fullest machines that fit
            return sorted(((c[2], share) for c in fitting[:k]), key=lambda x: x[0].name)
    shares, rest, out = [], count - k * k_min, []
    for cap, _, m in caps[:k]:
        extra = min(cap - k_min, rest)
        rest -= extra
        shares.append((m, k_min + extra))
    out = shares
    return out


def assign(
    view: View, group: Iterable[Machine], order: list[tuple[str, Ask]], distinct: bool, partial: bool = False
) -> list[tuple[str, Machine]] | None:
    """Each of ``order`` (name, ask) on the fullest machine of ``group`` where it fits, in turn.

    ``distinct``: one worker a machine. ``None`` when one does not fit; with ``partial``, the
    workers placed before the first that did not fit instead. ``view`` is left unchanged.
    """
    trial = View(view.s, view.empty)
    trial.over = dict(view.over)
    used: set[str] = set()
    out: list[tuple[str, Machine]] = []
    machines = list(group)
    for name, ask in order:
        pick = None
        for m in machines:
            if distinct and m.name in used:
                continue
            if trial.fits(m, ask, ask.gpus):
                key = (trial.free(m.name).gpus, m.name)
                if pick is None or key < pick[0]:
                    pick = (key, m)
        if pick is None:
            return out if partial else None
        trial.take(pick[1].name, ask, ask.gpus)
        used.add(pick[1].name)
        out.append((name, pick[1]))
    return out


def fixed(
    view: View,
    asks: list[tuple[str, Ask]],
    net: Net,
    distinct: bool,
    within: Sequence[Iterable[Machine]] | None = None,
) -> list[tuple[str, Machine]] | None:
    """Machines for known workers placed together, every one on one network group.

    ``within``: the groups to try, in order (a constrained run's, from ``netgroups``); else
    every machine, then each group of ``net`` over the usable machines.
    """
    order = sorted(asks, key=lambda a: -a[1].gpus)
    if within is not None:
        for group in within:
            got = assign(view, group, order, distinct)
            if got is not None:
                return got
        return None
    machines = [m for m in view.s.inventory if view.usable(m.name)]
    if len(asks) == 1 or (not distinct and not net.constrained):
        got = assign(view, machines, order, distinct)
        if got is not None or len(asks) == 1:
            return got
    for _, group in net.groups(machines):
        got = assign(view, group, order, distinct)
        if got is not None:
            return got
    return None


def place_decision(
    view: View, w_name: str, m: Machine, ask: Ask, gpus: int, new: NewWorker | None = None
) -> PlaceWorker:
    gu, cores, mem, _ = view.take(m.name, ask, gpus)
    return PlaceWorker(w_name, m.name, gpus, gu, cores, mem, new)


def machines_of(got) -> set[str]:
    """The machines a placement uses, whichever placer made it."""
    if isinstance(got, Machine):
        return {got.name}
    return {x.name for pair in got for x in pair if isinstance(x, Machine)}


def label(ask: Ask) -> str:
    return f" with {'/'.join(sorted(ask.models))}" if ask.models else ""
