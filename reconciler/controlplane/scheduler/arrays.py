"""Arrays: N alike copies of one worker, each on one machine, run at most ``max_parallel`` at once.

Owns: an array's copies as created, the cap on the copies that hold machines at once
(``array.max_parallel``) and the waiting copy's reason at the cap, and the seeds' ``K of N``
reason of an array that ended with failed copies.

Must not touch: the records, placement, restarts (a copy restarts as any worker does; that a
copy failing for good does not fail its array is the restart rules' to say), clocks, I/O.
"""

from __future__ import annotations

from reconciler.runspec import messages as msg
from reconciler.runspec.models import Spec
from reconciler.runspec.vocabulary import WorkerState, array_cap

from .records import MarkWorker, NewWorker, WorkerRecord, ask_of

__all__ = ["at_cap", "copies", "failed_reason", "parallel_cap"]


def copies(name: str, spec: Spec, first: int | None = None) -> list[NewWorker]:
    """The copies of array run ``name``: ranks 0..N-1, each the whole template on one machine
    (``first``: only that many of them)."""
    assert spec.array is not None and spec.task_template is not None
    ask = ask_of(spec.task_template)
    size = spec.array.size
    return [NewWorker(f"{name}-{i}", name, i, size, ask) for i in range(min(size, first or size))]


def parallel_cap(spec: Spec) -> int | None:
    """How many copies may hold machines at once; ``None``: no cap (or not an array)."""
    return spec.array.max_parallel if spec.array and spec.array.max_parallel else None


def at_cap(w: WorkerRecord, cap: int) -> MarkWorker | None:
    """The reason of the next waiting copy while the array holds ``cap`` machines (``None``: said)."""
    if w.reason == array_cap(cap):
        return None
    return MarkWorker(w.name, WorkerState.PENDING, array_cap(cap))


def failed_reason(failed: int, total: int, first: str | None) -> str:
    """``K of N workers failed; the first: ...``: an array whose copies have all ended."""
    return msg.ARRAY_FAILED_REASON.format(failed=failed, total=total, first=first)
