"""``on_every_core(work, shares)``: ``work(i, share)`` for each share of a job, the first in this
process and the others in processes forked from it (so each starts with every import done), as
many as there are cores; the answers in order. ``split(items)`` makes one share a core.

Only a process without other threads is forked (a fork copies none of them, nor the locks they
hold): ``forkable(n, minimum)`` says whether ``n`` items are worth it here. Used by
``astra validate`` (``reconciler.check``) and by a cold load (``reconciler.load``), which gives
this process other work ``meanwhile`` (a plan reads the cluster while its files load).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["cores", "forkable", "on_every_core", "split"]

T = TypeVar("T")


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def forkable(n: int, minimum: int) -> bool:
    """Whether ``n`` items are worth splitting over forked processes here."""
    return n >= minimum and cores() > 1 and hasattr(os, "fork") and threading.active_count() == 1


def split(items: Sequence[T]) -> list[list[T]]:
    """One share a core (every ``cores()``-th item, so that each gets alike)."""
    jobs = cores()
    return [list(items[i::jobs]) for i in range(jobs)]


def on_every_core(
    work: Callable[[int, Any], T], shares: Sequence[Any], *, meanwhile: Callable[[], None] | None = None
) -> list[T]:
    """``[work(0, shares[0]), work(1, shares[1]), …]``, the first here and the rest in forked
    processes, all at once.

    ``meanwhile``: other work for this process, which then leaves every share to a forked one
    and does it while they run (the cores are shared among all of them as they need)."""
    if len(shares) < 2 and meanwhile is None:
        return [work(i, share) for i, share in enumerate(shares)]
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    here = meanwhile is None
    with ProcessPoolExecutor(max(1, len(shares) - here), mp_context=get_context("fork")) as pool:
        others = [pool.submit(work, i, share) for i, share in enumerate(shares) if i or not here]
        if here:
            return [work(0, shares[0]), *(f.result() for f in others)]
        meanwhile()  # type: ignore[misc]
        return [f.result() for f in others]
