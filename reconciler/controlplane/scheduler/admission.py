"""Admission: a run's first look. Its start policy and on_failure, its workers, or why it can never fit.

Owns: which workers a run has when it is admitted (an array's copies, a task group's replicas, a
run split over ``machines``; none yet for a run whose shape is chosen when it is placed; a run on
a schedule is never admitted: it waits for its times, in words), and the
verdict that no placement could ever satisfy a run on this inventory, empty, with the reason in
words (``never_fits``): the run is then Failed at once rather than left waiting forever.

Must not touch: the records (admission returns ``AdmitRun`` or ``MarkRun``), the free room of
the moment (every verdict is on an empty cluster), clocks, I/O.
"""

from __future__ import annotations

from reconciler.runspec.models import Run, TaskTemplate, resolve_on_failure, resolve_start
from reconciler.runspec.schedules import waiting_words
from reconciler.runspec.vocabulary import RunState

from ..scopes import shown
from .arrays import copies
from .exceeds import exceeds, with_largest_group
from .netgroups import feasible, refusal
from .placement import Memo, Net, View, fixed, label, search
from .records import AdmitRun, Ask, Decision, MarkRun, NewWorker, RunRecord, ask_of
from .state import ClusterState
from .ticking import ADMIT_RUN_COST

__all__ = ["admission_cost", "admit", "never_fits", "one_by_one", "templates_of"]

#: The reason when the checks that name a cause find none, yet no placement holds the run.
_NEVER_TOGETHER = "no set of machines could ever hold this run together"


def templates_of(run: Run) -> list[TaskTemplate]:
    """The task templates of a run: one per task group, or its one template."""
    spec = run.spec
    if spec.task_groups:
        return [g.task_template for g in spec.task_groups]
    assert spec.task_template is not None
    return [spec.task_template]


def admit(state: ClusterState, r: RunRecord, memo: Memo | None = None) -> list[Decision]:
    """Admit a run with its policies and workers, or fail it with the reason it can never fit.

    A run on a schedule is a template (a Kubernetes CronJob): it is never admitted, has no
    workers, and stays Pending with the words of its schedule (``waiting_words``), once its
    first look found that it could fit (else it fails, and makes no runs)."""
    spec = r.run.spec
    waits = None
    if spec.schedule is not None:
        waits = waiting_words(r.run.metadata.name, spec.schedule.cron, spec.schedule.timezone)
        if r.reason == waits:
            return []
    start = resolve_start(spec, state.max_gpus)
    on_failure = resolve_on_failure(spec, start)
    name = r.name
    workers: list[NewWorker] = []
    if spec.array is not None:  # its copies are alike: the first one is enough for the verdict
        workers = copies(name, spec, 1)
    elif spec.task_groups:
        size = sum(g.replicas for g in spec.task_groups)
        rank = 0
        for g in spec.task_groups:
            ask = ask_of(g.task_template)
            for i in range(g.replicas):
                workers.append(NewWorker(f"{name}-{g.name}-{i}", name, rank, size, ask, g.name, i))
                rank += 1
    else:
        tt = spec.task_template
        assert tt is not None
        res = tt.requested_resources
        n = res.machines if res and res.machines else None
        if res is None or res.gpu_requests is None:
            n = n or 1
            ask = ask_of(tt)  # one for all of them (an Ask is frozen), as a task group's
            workers = [NewWorker(f"{name}-{i}", name, i, n, ask) for i in range(n)]
        elif n is not None:
            ask = ask_of(tt, res.gpu_requests.count // n)
            workers = [NewWorker(f"{name}-{i}", name, i, n, ask) for i in range(n)]
    why = with_largest_group(never_fits(state, r, workers, start, memo), state.inventory, r.run)
    if why is not None:
        return [MarkRun(name, RunState.FAILED, why)]
    if waits is not None:
        return [MarkRun(name, RunState.PENDING, waits)]
    if spec.array is not None:
        workers = copies(name, spec)
    return [AdmitRun(name, start, on_failure, tuple(workers))]


def admission_cost(run: Run) -> int:
    """What admitting ``run`` costs of a ``ticking.Admissions`` at most: the workers ``admit``
    may make for it (an array's copies, a group's replicas, one a machine) and the run's own."""
    spec = run.spec
    if spec.array is not None:
        made = spec.array.size
    elif spec.task_groups:
        made = sum(g.replicas for g in spec.task_groups)
    else:
        res = spec.task_template.requested_resources if spec.task_template is not None else None
        made = (res.machines if res is not None else None) or 1
    return ADMIT_RUN_COST + made


def never_fits(
    state: ClusterState, r: RunRecord, workers: list[NewWorker], start: str, memo: Memo | None = None
) -> str | None:
    """Why no placement could ever satisfy the run (on an empty cluster), or ``None``.

    First what one template asks of single machines (models, GPU memory, GPUs per machine), then
    whether the run's workers, or its shape, could be placed at all.
    """
    for tt in templates_of(r.run):
        why = _template_never_fits(state, r.run, tt) or exceeds(state.inventory, r.run, tt)
        if why is not None:
            return why
    view = View(state, empty=True)
    net = Net.of(r.run)
    if not workers:
        return _shape_never_fits(view, r.run, net, memo)
    if net.constrained:  # a group that holds them all together holds each alone
        asks = (workers[0].ask,) if r.run.spec.array is not None else tuple(w.ask for w in workers)
        distinct = r.run.spec.array is None and r.run.spec.task_groups is None
        return None if feasible(state, asks, net, distinct) else refusal(r.run.spec, asks)
    if r.run.spec.array is not None:
        return one_by_one(view, workers[:1])  # copies are alike and placed one by one
    if start != "Gang":
        return one_by_one(view, workers)
    if fixed(view, [(w.name, w.ask) for w in workers], net, r.run.spec.task_groups is None) is not None:
        return None
    return _NEVER_TOGETHER


def _template_never_fits(state: ClusterState, run: Run, tt: TaskTemplate) -> str | None:
    """Why no machine could ever hold what ``tt`` asks of one machine, or ``None``.

    The inventory's answer for what the template asks, kept by the state once made
    (``ClusterState.verdicts``): a queue of alike runs looks at the machines once."""
    spec = run.spec
    res = tt.requested_resources
    gr = res.gpu_requests if res else None
    if gr is None:
        return None
    ask = ask_of(tt)
    key = (
        ask,
        tuple(gr.models or ()),
        gr.count,
        gr.min_per_machine,
        gr.min_memory_gb,
        spec.array is not None,
        spec.task_groups is not None,
        res.machines if res else None,
    )
    if key not in state.verdicts:
        state.verdicts[key] = _never_fits_alone(state, run, tt, ask)
    return state.verdicts[key]


def _never_fits_alone(state: ClusterState, run: Run, tt: TaskTemplate, ask: Ask) -> str | None:
    """``_template_never_fits``, worked out from the machines."""
    inv = state.inventory
    spec = run.spec
    res = tt.requested_resources
    gr = res.gpu_requests if res else None
    assert gr is not None
    if gr.models:
        have = sorted({m.gpu_model for m in inv})
        if not any(m.gpu_model in gr.models for m in inv):
            return (
                f"gpu_requests.models {', '.join(gr.models)} but no machine has those GPUs "
                f"(the cluster has {', '.join(have)})"
            )
    ms = [m for m in inv if ask.eligible(m) or not (gr.models or gr.min_memory_gb)]
    if gr.min_memory_gb is not None:
        ms = [m for m in inv if ask.with_gpus(1).eligible(m)]
        if not ms:
            top = max(m.gpu_memory_gb for m in inv if not gr.models or m.gpu_model in gr.models)
            return (
                f"gpu_requests.min_memory_gb {gr.min_memory_gb:g} but the largest GPU memory"
                f"{label(ask)} is {top:g} GB"
            )
    ms = [m for m in ms if ask.with_gpus(1).eligible(m)]
    health = " healthy" if ask.healthy_only else ""
    largest = max((m.healthy if ask.healthy_only else m.gpus) for m in ms)
    if gr.min_per_machine and largest < gr.min_per_machine:
        return (
            f"min_per_machine {gr.min_per_machine} but the largest machine{label(ask)} "
            f"has {largest}{health} GPUs"
        )
    one_machine = spec.array is not None or spec.task_groups is not None
    if one_machine and largest < gr.count:
        what = "an array copy" if spec.array is not None else "a group's worker"
        return (
            f"gpu_requests.count {gr.count} but {what} runs on one machine and the largest "
            f"machine{label(ask)} has {largest}{health} GPUs"
        )
    if res and res.machines:
        share = gr.count // res.machines
        able = sum(1 for m in ms if View(state, True).fits(m, ask.with_gpus(share), share))
        if able < res.machines:
            return (
                f"machines {res.machines} with {share} GPUs each but only {able} machines"
                f"{label(ask)} can hold {share}{health} GPUs with their cores and memory"
            )
    return None


def _shape_never_fits(view: View, run: Run, net: Net, memo: Memo | None) -> str | None:
    """Why no shape on the empty cluster (``view``) could hold a run whose shape is chosen later."""
    spec = run.spec
    tt = spec.task_template
    assert tt is not None and tt.requested_resources and tt.requested_resources.gpu_requests
    gr = tt.requested_resources.gpu_requests
    ask = ask_of(tt)
    k_min = gr.min_per_machine or 1
    if memo is None:
        fits = search(view, ask, gr.count, k_min, net) is not None
    else:  # the empty cluster is the same all tick: one verdict per ask
        key = (ask, gr.count, k_min, net)
        known = memo.empty_shapes.get(key)
        if known is None:
            known = memo.empty_shapes[key] = search(view, ask, gr.count, k_min, net, memo) is not None
        fits = known
    if fits:
        return None
    total = sum(view.cap(m, ask) for m in view.s.inventory)
    if total < gr.count:
        return _too_many(view, ask, gr.count, total)
    if spec.topology and spec.topology.keep_within:
        within = spec.topology.keep_within
        return f"topology.keep_within {within} but no {within} can hold {gr.count} GPUs"
    if spec.network and spec.network.interconnect:
        net_name = spec.network.interconnect
        return f"network.interconnect {net_name} but no {net_name} network can hold {gr.count} GPUs"
    return _NEVER_TOGETHER


def _too_many(view: View, ask: Ask, count: int, total: int) -> str:
    """Why ``count`` GPUs of ``ask`` never fit when the empty cluster holds only ``total`` of them:
    the machines have fewer GPUs than that, or their cores and memory hold fewer of this run's."""
    ms = [m for m in view.s.inventory if ask.eligible(m)]
    had = [m.healthy if ask.healthy_only else m.gpus for m in ms]
    health = " healthy" if ask.healthy_only else ""
    if sum(had) < count:
        return (
            f"gpu_requests.count {count} but all {len(ms)} machines{label(ask)} together have "
            f"{sum(had)}{health} GPUs; the largest has {max(had, default=0)}"
        )
    return (
        f"gpu_requests.count {count} but the machines{label(ask)} can hold at most "
        f"{total} GPUs of this run with its cores and memory per GPU"
    )


def one_by_one(view: View, workers: list[NewWorker]) -> str | None:
    """Why one of ``workers``, each placed alone, fits on no machine (of ``view``), or ``None``."""
    for w in workers:
        if not _fits_alone(view, w.ask):
            g = w.ask.gpus
            return (
                f"worker {shown(w.name)} needs {g} GPUs, {w.ask.cores(g)} cores and "
                f"{w.ask.memory(g)} bytes of memory on one machine, more than any machine has"
            )
    return None


def _fits_alone(view: View, ask: Ask) -> bool:
    """Whether one worker of ``ask`` fits on some machine of ``view``: on an empty cluster, the
    inventory's answer, kept by the state once made (``ClusterState.fits_alone``)."""
    if not view.empty or view.over:
        return any(view.fits(m, ask, ask.gpus) for m in view.s.inventory)
    kept = view.s.fits_alone
    if ask not in kept:
        kept[ask] = any(view.fits(m, ask, ask.gpus) for m in view.s.inventory)
    return kept[ask]
