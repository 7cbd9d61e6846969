"""The cost of stopping a run: how many workers and GPUs, and for how long they had run.

``cost_of(live, workers, now)`` reads the live run (and its workers, when they were fetched)
as the cluster reported them; ``now`` is passed in. ``describe_cost`` puts a cost in words for the
plan's text (with ``duration_words``, which lives with the other durations in
``runspec.quantities``; re-exported here). Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..runs import LiveRun, WorkerInfo
from ..runspec.quantities import duration_words
from ..runspec.vocabulary import FINAL_RUN_STATES
from .model import Cost

__all__ = ["cost_of", "describe_cost", "duration_words"]

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
