"""``apply --wait``, told truly: when each run applied is done, and when it went wrong.

* a Batch run is done when it ends (``FINAL_RUN_STATES``): Completed is good, Failed and
  Cancelled are not;
* a Service run is **Ready** once it has been Running for ``settle`` seconds without a restart
  (a worker's restart count grew, or its reason says a restart is coming: ``Exited with code 1;
  restart 1 in 10 s``); one that restarts while waited on is **Restarting**, a failure named
  with its last reason, at once (a Service that fails at start would otherwise look Running);
* a run on a schedule is **Scheduled** at once (a template, as a CronJob: it never runs itself);
* a run that went away is **Gone** (a failure: what was applied no longer runs);
* a Batch run whose reason says a worker could not start at all, or that one failure has cost
  half the restart budget (``runspec.restarting.hopeless``), is **Restarting** too, at once: the
  rest of the backoff would only say it again.

``WaitJudge.see(name, run, workers, now)`` is pure (time comes in); ``wait_for`` polls the
cluster with the ``sleep`` and ``clock`` it is given (the CLI's real ones, a test's simulated).

Must not touch: the plan, the sources' state, printing.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from .clusters.base import Cluster
from .runs import LiveRun, WorkerInfo
from .runspec.restarting import hopeless, restart_of
from .runspec.vocabulary import FINAL_RUN_STATES

__all__ = ["BAD", "DEFAULT_SETTLE", "Verdict", "WaitJudge", "wait_for"]

#: ``--settle``'s default: how long a Service runs without a restart to count as Ready.
DEFAULT_SETTLE = 10.0
#: The verdicts that make ``--wait`` exit 1.
BAD = frozenset({"Failed", "Cancelled", "Restarting", "Gone"})
#: A run on a schedule, at once: it holds no workers; the runs it makes are made later.
SCHEDULED = "on a schedule: it makes a run at each time (astra get runs shows the next)"
#: What a worker's reason holds while a restart is coming (``messages.RESTART_REASON``).
_RESTART_MARK = "; restart"


@dataclass(frozen=True)
class Verdict:
    """Where one run stands: ``done`` once nothing more is awaited of it."""

    state: str  # a run state, or Ready, Restarting, Gone
    reason: str
    done: bool


class WaitJudge:
    """Judges each run from what the cluster shows, remembering what it needs between looks."""

    def __init__(self, settle: float = DEFAULT_SETTLE, fresh: Collection[str] = ()):
        """``fresh``: the runs just created (or replaced): any restart of theirs counts, even
        one before the first look; of the others, those after it."""
        self.settle = settle
        self._running_since: dict[str, float] = {}
        self._restarts: dict[str, int] = dict.fromkeys(fresh, 0)
        self._failures: dict[str, set[str]] = {}

    def see(self, name: str, run: LiveRun | None, workers: Sequence[WorkerInfo], now: float) -> Verdict:
        if run is None:
            return Verdict("Gone", "the run is no longer on the cluster", True)
        if run.state in FINAL_RUN_STATES:
            return Verdict(run.state, run.reason, True)
        if run.schedule is not None:  # a template: it never runs itself, so it is done at once
            return Verdict("Scheduled", SCHEDULED, True)
        if not _is_service(run):
            why = self._hopeless(name, run.reason)
            if why is not None:
                return Verdict("Restarting", f"{why}: {run.reason}", True)
            return Verdict(run.state, run.reason, False)
        restarts = sum(w.restarts for w in workers)
        first = self._restarts.setdefault(name, restarts)
        coming = next((w for w in workers if _RESTART_MARK in (w.reason or "")), None)
        if restarts > first or coming is not None:
            why = coming.reason if coming is not None else _last_reason(run, workers)
            return Verdict("Restarting", why, True)
        if run.state != "Running":
            self._running_since.pop(name, None)
            return Verdict(run.state, run.reason, False)
        since = self._running_since.setdefault(name, now)
        if now - since >= self.settle:
            return Verdict("Ready", f"Running for {self.settle:g} s without a restart", True)
        return Verdict("Running", f"settling: {now - since:.1f} of {self.settle:g} s", False)

    def _hopeless(self, name: str, reason: str) -> str | None:
        """Why waiting on run ``name`` is in vain, remembering each failure its reason named."""
        again = restart_of(reason)
        if again is not None:
            self._failures.setdefault(name, set()).add(again.failure)
        return hopeless(reason, same=len(self._failures.get(name, ())) <= 1)


def _is_service(run: LiveRun) -> bool:
    from .runspec.normalize import LIFETIME  # reads the published schema: only when needed

    return (run.document.get("spec") or {}).get("lifetime", LIFETIME) == "Service"


def _last_reason(run: LiveRun, workers: Sequence[WorkerInfo]) -> str:
    said = [w.reason for w in workers if w.reason]
    return said[-1] if said else run.reason or "a worker restarted"


def wait_for(
    cluster: Cluster,
    names: Collection[str],
    *,
    fresh: Collection[str] = (),
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    settle: float = DEFAULT_SETTLE,
    on_update: Callable[[dict[str, Verdict]], None] | None = None,
    interval: float = 1.0,
) -> dict[str, Verdict]:
    """Poll ``names`` until each is done; the last verdict of each. A Service's workers are read
    (their restarts) only while it is waited on."""
    judge = WaitJudge(settle, fresh)
    verdicts: dict[str, Verdict] = {}
    while True:
        now = clock()
        for name in sorted(names):
            if name in verdicts and verdicts[name].done:
                continue
            run = cluster.get_run(name)
            workers = cluster.workers(name) if run is not None and _is_service(run) else []
            verdicts[name] = judge.see(name, run, workers, now)
        if on_update:
            on_update(dict(verdicts))
        if all(v.done for v in verdicts.values()):
            return verdicts
        sleep(interval)
