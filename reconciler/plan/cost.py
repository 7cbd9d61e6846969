"""The cost of stopping a run (how many workers and GPUs, for how long they had run), and of
starting one (the GPUs it asks for, and whether any machine of the cluster could hold them).

``cost_of(live, workers, now)`` reads the live run (and its workers, when they were fetched)
as the cluster reported them; ``now`` is passed in. ``describe_cost`` puts a cost in words for the
plan's text (with ``duration_words``, which lives with the other durations in
``runspec.quantities``; re-exported here). ``describe_ask`` says what a run document asks for
(``asks: 100 copies of 1 GPU, at most 8 at once``), and ``impossible_ask`` why no machine of a
cluster (its ``Capacity``) could ever hold it. ``describe_spend`` says what a create would spend
of its workspace's GPU-hour budget (as the cluster said it: ``Plan.budget``) if every worker ran
to its time limit. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..runs import Capacity, LiveRun, WorkerInfo
from ..runspec.quantities import duration_words
from ..runspec.vocabulary import FINAL_RUN_STATES
from .model import Cost

__all__ = ["cost_of", "describe_ask", "describe_cost", "describe_spend", "duration_words", "impossible_ask"]

#: Worker states in which a worker holds no machine.
_IDLE_WORKER_STATES = frozenset({"Pending", "Queued", *FINAL_RUN_STATES})


def cost_of(live: LiveRun, workers: Sequence[WorkerInfo] | None, now: float) -> Cost:
    """What stopping ``live`` now would stop."""
    if live.final:
        ago = None if live.finished_at is None else max(0.0, now - live.finished_at)
        return Cost(state=live.state, finished_seconds_ago=ago)
    if workers is None:
        ran = None if live.started_at is None else max(0.0, now - live.started_at)
        return Cost(
            state=live.state,
            workers=live.workers_running,
            gpus=live.gpus_held,
            ran_seconds_min=ran if live.workers_running else None,
            ran_seconds_max=ran if live.workers_running else None,
            gpu_seconds=(ran or 0.0) * live.gpus_held,
        )
    busy = [w for w in workers if w.state not in _IDLE_WORKER_STATES]
    spans = [max(0.0, now - w.started_at) for w in busy if w.started_at is not None]
    return Cost(
        state=live.state,
        workers=len(busy),
        gpus=sum(w.gpus for w in busy),
        ran_seconds_min=min(spans) if spans else None,
        ran_seconds_max=max(spans) if spans else None,
        gpu_seconds=sum(w.gpus * max(0.0, now - w.started_at) for w in busy if w.started_at is not None),
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def describe_cost(cost: dict | Cost, action: str) -> str:
    """The cost in words, for ``replace`` or ``delete`` (reads the plan's JSON form or a ``Cost``)."""
    c = cost if isinstance(cost, dict) else cost.__dict__
    state = c["state"]
    if state in FINAL_RUN_STATES:
        ago = c.get("finished_seconds_ago")
        when = f" {duration_words(ago)} ago" if ago is not None else ""
        if action == "replace":
            return f"reruns: the run {state}{when}; it starts again from the beginning"
        return f"stops nothing: the run {state}{when}"
    if not c["workers"]:
        return f"stops nothing running yet (the run is {state})"
    what = f"stops {_plural(c['workers'], 'worker')} and {_plural(c['gpus'], 'GPU')}"
    low, high = c.get("ran_seconds_min"), c.get("ran_seconds_max")
    if high is None:
        return what
    if low is None or duration_words(low) == duration_words(high):
        what += f" that had run for {duration_words(high)}"
    else:
        what += f" that had run for {duration_words(low)} to {duration_words(high)}"
    hours = c.get("gpu_seconds", 0.0) / 3600
    if hours >= 0.05:
        amount = f"{hours:.1f}" if hours < 10 else f"{round(hours)}"
        what += f" (about {amount} GPU-hours of work)"
    return what


def _count(template: Any) -> int:
    """The GPUs one worker template asks for (0 when it asks for none, or says it oddly)."""
    try:
        count = template["requested_resources"]["gpu_requests"]["count"]
    except (KeyError, TypeError):
        return 0
    return count if isinstance(count, int) and not isinstance(count, bool) else 0


def _asks(document: Any) -> tuple[str, int, list[tuple[str, int]]]:
    """``(kind, GPUs in all, [(what, GPUs one machine must hold), ...])`` of a run document."""
    spec = document.get("spec") if isinstance(document, dict) else None
    if not isinstance(spec, dict):
        return "run", 0, []
    array, groups = spec.get("array"), spec.get("task_groups")
    if isinstance(array, dict) and isinstance(array.get("size"), int):
        copy = _count(spec.get("task_template"))
        return "array", copy * array["size"], [("an array copy", copy)] if copy else []
    if isinstance(groups, list):
        total = 0
        workers: list[tuple[str, int]] = []
        for g in groups:
            if isinstance(g, dict):
                n = _count(g.get("task_template"))
                replicas = g.get("replicas")
                total += n * (replicas if isinstance(replicas, int) else 1)
                if n:
                    workers.append((f"a worker of group {g.get('name')}", n))
        return "groups", total, workers
    template = spec.get("task_template")
    n = _count(template)
    machines = ((template or {}).get("requested_resources") or {}).get("machines")
    gr = ((template or {}).get("requested_resources") or {}).get("gpu_requests") or {}
    per = []
    if isinstance(machines, int) and machines > 0 and n:
        per.append(("each of its machines", -(-n // machines)))
    if isinstance(gr.get("min_per_machine"), int) and gr["min_per_machine"] > 0:
        per.append(("one of its machines (min_per_machine)", gr["min_per_machine"]))
    return "run", n, per


def describe_ask(document: Any) -> str | None:
    """What a run document asks for, in words (``None`` when it asks for no GPU)."""
    kind, total, _ = _asks(document)
    if not total:
        return None
    spec = document["spec"]
    if kind == "array":
        each, size = _count(spec.get("task_template")), spec["array"]["size"]
        cap = spec["array"].get("max_parallel") or 0
        at_once = f", at most {cap} at once" if cap and cap < size else ""
        copies = "1 copy" if size == 1 else f"{size} copies"
        return f"{copies} of {_plural(each, 'GPU')}{at_once}"
    return _plural(total, "GPU")


def impossible_ask(document: Any, capacity: Capacity) -> str | None:
    """Why no machine of a cluster with ``capacity`` could ever hold the run, or ``None``."""
    kind, total, per = _asks(document)
    for what, n in per:
        if n > capacity.largest_gpus:
            largest = capacity.largest_gpus
            return f"no machine of this cluster has {n} GPUs ({what}); the largest has {largest}"
    if kind == "run" and total > capacity.total_gpus:
        return (
            f"no machine of this cluster has {total} GPUs; the largest has {capacity.largest_gpus}, "
            f"and all {capacity.machines} together have {capacity.total_gpus}"
        )
    return None


def _limit(template: Any) -> float | None:
    """A worker template's time limit in seconds (``None``: it states none)."""
    limit = template.get("time_limit_seconds") if isinstance(template, dict) else None
    return float(limit) if isinstance(limit, int | float) and not isinstance(limit, bool) else None


def _to_limit(document: Any) -> tuple[str, float] | None:
    """``("8 GPUs × 12h", GPU-hours)`` a run would spend if each worker ran to its time limit;
    ``None`` when a worker asking for GPUs states none (then nothing bounds it)."""
    spec = document["spec"]
    array, groups = spec.get("array"), spec.get("task_groups")
    if isinstance(groups, list):
        hours = 0.0
        for g in (g for g in groups if isinstance(g, dict)):
            n, replicas = _count(g.get("task_template")), g.get("replicas")
            limit = _limit(g.get("task_template"))
            if n and limit is None:
                return None
            hours += n * (replicas if isinstance(replicas, int) else 1) * (limit or 0.0) / 3600
        return "each group's workers to their time limits", hours
    template = spec.get("task_template")
    limit, n = _limit(template), _count(template)
    if limit is None:
        return None
    if isinstance(array, dict) and isinstance(array.get("size"), int):
        size = array["size"]
        copies = "1 copy" if size == 1 else f"{size} copies"
        return f"{copies} × {_plural(n, 'GPU')} × {duration_words(limit)}", size * n * limit / 3600
    return f"{_plural(n, 'GPU')} × {duration_words(limit)}", n * limit / 3600


def _hours(h: float) -> str:
    return f"{h:.1f}".removesuffix(".0") if h < 10 else f"{round(h)}"


def describe_spend(document: Any, budget: dict[str, Any]) -> str | None:
    """What a create would spend of its workspace's budget if it ran to its time limit
    (``8 GPUs × 12h = 96 GPU-hours, 4% of team-a's 2500 left of 5000 this month``); ``None``
    when it asks for no GPU."""
    if describe_ask(document) is None:
        return None
    ws, per, whole = budget["workspace"], budget["per"], _hours(budget["gpu_hours"])
    left = budget["left_gpu_hours"]
    spent = _to_limit(document)
    if spent is None:
        of = f"{ws}'s {_hours(left)} GPU-hours left of {whole} this {per}"
        return f"no time limit: nothing bounds what it spends of {of}"
    how, hours = spent
    head = f"{how} = {_hours(hours)} GPU-hours"
    if left <= 0:
        return f"{head}; {ws} has used its {whole} GPU-hours this {per}: it waits until the next {per}"
    share = 100 * hours / left
    said = "<1%" if 0 < share < 1 else f"{round(share)}%"
    return f"{head}, {said} of {ws}'s {_hours(left)} left of {whole} this {per}"
