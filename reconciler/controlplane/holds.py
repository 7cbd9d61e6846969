"""GPU-hours at the source: which workers hold GPUs, since when, told to the store as they change.

Owns ``HoldBook``: the holds open now (a worker's key → when its hold began, on the control
plane's clock), and ``changes``, which turns the workers and runs a tick touched into the rows
the store writes in the tick's own transaction (``store.HoldChanges``): a hold opens when a
worker is placed on a machine with GPUs (Preparing: the GPUs are its from then on) and closes
when it lets them go (it ended, was stopped, preempted, lost, or requeued); a run that ends
gives its outcome (Completed, Failed, Cancelled) to its holds, so that the GPU-hours of failed
runs can be told apart. At a restart the engine's recovery closes the holds of the workers it
finds gone (``Engine._recover``), at the moment it finds them gone: the control plane cannot
know when a process it did not watch ended, and counts what it held until it knew.

Must not touch: the scheduler's rules, SQL (the store writes the rows), clocks (``now`` is given).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from reconciler.runspec.vocabulary import FINAL_RUN_STATES

from .scheduler import HOLDING, RunRecord, WorkerRecord
from .scopes import scope_of
from .store import HoldChanges

__all__ = ["HoldBook"]


class HoldBook:
    """The GPUs' holds open now, by worker key."""

    def __init__(self, open_holds: dict[str, tuple[float, int, str]]) -> None:
        #: each open hold: worker key → (when it began, its GPUs, its workspace ``ORG/WORKSPACE``)
        self.open = dict(open_holds)
        #: holds closed since ``drain`` was last called: (workspace, GPUs, began, ended)
        self.ended: list[tuple[str, int, float, float]] = []

    def drain(self) -> list[tuple[str, int, float, float]]:
        """The holds closed since the last call (the budgets count them once)."""
        ended, self.ended = self.ended, []
        return ended

    def changes(
        self,
        workers: Iterable[WorkerRecord],
        runs: Iterable[RunRecord],
        now: float,
        labels_of: Callable[[str], dict[str, Any]],
    ) -> HoldChanges:
        """The holds ``workers`` (as they are now) open and close at ``now``, and the outcomes of
        ``runs`` that have ended."""
        out = HoldChanges()
        for w in workers:
            holding = w.state in HOLDING and w.machine is not None and w.gpus > 0
            if holding and w.name not in self.open:
                org, workspace, cluster = scope_of(w.run)
                self.open[w.name] = (now, w.gpus, f"{org}/{workspace}")
                out.opened.append(
                    {
                        "run": w.run,
                        "worker": w.name,
                        "org": org,
                        "workspace": workspace,
                        "cluster": cluster,
                        "gpus": w.gpus,
                        "started_at": now,
                        "ended_at": None,
                        "outcome": None,
                        "labels": json.dumps(labels_of(w.run), sort_keys=True),
                    }
                )
            elif not holding and w.name in self.open:
                began, gpus, ws = self.open.pop(w.name)
                self.ended.append((ws, gpus, began, now))
                out.closed.append({"b_worker": w.name, "ended_at": now})
        for r in runs:
            if r.state in FINAL_RUN_STATES:
                out.ended.append({"b_run": r.name, "outcome": str(r.state)})
        return out
