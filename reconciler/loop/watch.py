"""Driving the reconcile steps: one source from its events and a periodic resync (``Watch``),
several sources in one loop (``Fleet``: ``astra watch -c astra.yaml``).

``Watch(reconciler, events, interval=…)`` waits for the next thing to do (``events(timeout)``:
the paths that changed, ``TRIGGER`` for "a full pass now", or ``None`` to stop) and does it: a
pass of the changed files, a full pass at each resync (``interval``, ±10% jitter) or on
``TRIGGER`` (a webhook), a retry of a failed pass or of runs whose backoff has passed.
A suspended source (``suspended``: ``astra source suspend``) has no pass at all, whatever the
events; it is looked at again every ``SUSPEND_POLL`` seconds, and its first pass once resumed is
a full one. ``wake_at()`` and ``act(changed)`` are the two halves of ``step``; ``Fleet`` uses
them to drive several watches from one event source, each with its own interval, status and lock, and one
source's failure (any exception, which becomes that source's status) never stops the others.

The clock, the random source and the event sources are injected (``FileEvents`` wraps
watchfiles; ``HookEvents`` asks the control plane whether a source's webhook was called), so
tests need no sleeps.

Must not touch: what a pass does (``steps``).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from ..collector import Collector, gc_paused
from ..state.suspension import Suspension
from .steps import JITTER, Reason, Reconciler, State
from .suspended import SUSPEND_POLL, held_status, suspension

__all__ = ["TRIGGER", "Events", "FileEvents", "Fleet", "HookEvents", "Watch"]

log = logging.getLogger(__name__)

#: An event that asks for a full pass now (a webhook was called).
TRIGGER = "\0trigger"

#: An event source: wait up to ``timeout`` seconds; the paths that changed (empty: none;
#: ``TRIGGER``: a full pass now), or ``None`` to stop.
Events = Callable[[float], "set[str] | None"]


class Watch:
    """Drive a ``Reconciler`` from events and a periodic, jittered resync."""

    def __init__(
        self,
        reconciler: Reconciler,
        events: Events,
        *,
        interval: float = 300.0,
        clock: Callable[[], float],
        rng: random.Random | None = None,
        on_status: Callable[[dict], None] | None = None,
    ):
        self.reconciler = reconciler
        self.events = events
        self.interval = interval
        self.clock = clock
        self.rng = rng or random.Random()
        self.on_status = on_status
        self.next_resync = clock()  # the first pass is a full one, at once
        self._collector = Collector()  # ``run``'s: what a full pass left alive is frozen
        self.suspended: Suspension | None = None  # the suspension last found (``suspended``)
        self.suspended_look = 0.0  # when a suspended source's suspension is read again

    def _jittered(self) -> float:
        return self.interval * (1 + JITTER * (2 * self.rng.random() - 1))

    def wake_at(self) -> float:
        """When this watch has something to do next (a resync, a retry), without events."""
        if self.suspended is not None:  # no retry, no resync: a look at the suspension
            return min(self.next_resync, self.suspended_look)
        wake = self.next_resync
        due = self.reconciler.next_due()
        if due is not None:
            wake = min(wake, due)
        if self.reconciler.retry_at is not None:
            wake = min(wake, self.reconciler.retry_at)
        return wake

    def step(self) -> bool:
        """Wait for the next thing to do and do it; ``False`` when the event source has stopped."""
        changed = self.events(max(0.0, self.wake_at() - self.clock()))
        if changed is None:
            return False
        self.act(changed)
        return True

    def act(self, changed: Collection[str]) -> dict[str, Any] | None:
        """Do what is due now, given the events (``TRIGGER``: a full pass); the status written,
        or ``None`` when nothing was due."""
        now = self.clock()
        triggered = TRIGGER in changed
        paths = {c for c in changed if c != TRIGGER}
        if not self._due(now, paths, triggered):
            return None
        held = suspension(self.reconciler)
        if held is not None:
            return self._hold(held, now)
        if self.suspended is not None:  # resumed: a full pass now (a remote's newest commit)
            self.suspended, paths, triggered = None, set(), True
        if paths and not triggered:
            status = self.reconciler.reconcile_once(paths)
        elif triggered or now >= self.next_resync:
            status = self.reconciler.reconcile_once(None)
            self.next_resync = self.clock() + self._jittered()
            # what the pass left alive (the loaded documents, the source's state) lives on: the
            # cyclic collector stops walking it at every later pass, once what was garbage is
            # collected (frozen objects are still freed when nothing refers to them)
            self._collector.settle()
        elif self.reconciler.retry_at is not None and now >= self.reconciler.retry_at:
            status = self.reconciler.reconcile_once(None)
        elif self.reconciler.due():
            status = self.reconciler.reconcile_once(set(), names=self.reconciler.due())
        else:
            return None
        if self.on_status:
            self.on_status(status)
        return status

    def _due(self, now: float, paths: set[str], triggered: bool) -> bool:
        """Whether ``act`` has something to do now (a pass; a suspended source's next look)."""
        if self.suspended is not None:
            return bool(paths) or triggered or now >= min(self.next_resync, self.suspended_look)
        retry = self.reconciler.retry_at
        return bool(
            paths or triggered or now >= self.next_resync or (retry is not None and now >= retry)
        ) or bool(self.reconciler.due())

    def _hold(self, held: Suspension, now: float) -> dict[str, Any] | None:
        """The source is suspended: no pass; said once (``on_status``), looked at again later."""
        first = self.suspended != held
        self.suspended = held
        self.suspended_look = now + SUSPEND_POLL
        if now >= self.next_resync:
            self.next_resync = now + self._jittered()
        if not first:
            return None
        status = held_status(self.reconciler, held, now)
        if self.on_status:
            self.on_status(status)
        return status

    def run(self) -> None:
        """Step until the events end (a test's scripted events, or a stop)."""
        with gc_paused(pause=False) as self._collector:  # unfrozen when the loop ends
            running = True
            while running:
                running = self.step()


#: Several sources' events: wait up to ``timeout``; each source's events by its name (a source
#: not named has none), or ``None`` to stop.
FleetEvents = Callable[[float], "dict[str, set[str]] | None"]


class Fleet:
    """Several watches in one loop (see the module docstring), by source name."""

    def __init__(self, watches: Mapping[str, Watch], events: FleetEvents, *, clock: Callable[[], float]):
        self.watches = dict(watches)
        self.events = events
        self.clock = clock

    def step(self) -> bool:
        """Wait for the first thing to do among the sources and do what is due; ``False`` when
        the event source has stopped."""
        wake = min(w.wake_at() for w in self.watches.values())
        got = self.events(max(0.0, wake - self.clock()))
        if got is None:
            return False
        for name, watch in self.watches.items():
            try:
                watch.act(got.get(name, set()))
            except Exception as exc:  # one source's failure is its own: said in its status, never the others'
                log.exception("source %s: a pass failed", name)
                failed = {
                    "state": State.reconciling.value,
                    "reason": Reason.progressing.value,
                    "message": f"interrupted: {type(exc).__name__}: {exc}",
                }
                watch.reconciler.retry_at = self.clock() + watch.interval
                if watch.on_status:
                    watch.on_status(failed)
        return True

    def run(self) -> None:
        running = True
        while running:
            running = self.step()


#: watchfiles looks for changes every ``STEP_MS`` and yields them once a look finds no new
#: one (a file changed again is no new one), grouping them for at most ``DEBOUNCE_MS``: a change
#: is seen one to two steps after it was made (its default step, 50 ms, was most of a one-file
#: pass's time). A save is seen whole when it takes less than a step (an editor's truncate and
#: write, or its temporary file renamed over the old one, take well under a millisecond); a
#: file seen half-written almost always fails to load (the pass stalls: nothing is pruned), and
#: the rest of the save is seen at the next look.
STEP_MS = 5
DEBOUNCE_MS = 50


class FileEvents:
    """watchfiles on the paths (and the template folders): ``events(timeout)`` for ``Watch``."""

    def __init__(self, paths: Collection[str], stop: Callable[[], bool] = lambda: False):
        import watchfiles

        from ..template_files import folders_for

        roots = [p for p in paths] + [str(f) for f in folders_for(paths) if f.is_dir()]
        self._stop = stop
        self._iter: Iterator[set[tuple[Any, str]]] = iter(
            watchfiles.watch(
                *roots,
                yield_on_timeout=True,
                rust_timeout=200,
                debounce=DEBOUNCE_MS,
                step=STEP_MS,
                raise_interrupt=False,
            )
        )

    def __call__(self, timeout: float) -> set[str] | None:
        import time

        deadline = time.monotonic() + timeout
        while not self._stop():
            try:
                changes = next(self._iter)
            except StopIteration:
                return None
            found = {path for _, path in changes if not _ignored(path)}
            if found or time.monotonic() >= deadline:
                return found
        return None


class HookEvents:
    """Whether sources' webhooks were called: ``events(timeout)`` for ``Fleet`` (and, for one
    source, ``Watch`` through ``single``). Every ``poll`` seconds (and at once at the first
    call) it asks ``count(name)`` (the control plane's count of the source's webhook calls:
    ``GET /sources/{name}/hook``) and answers ``{name: {TRIGGER}}`` for each source whose count
    grew. A count that fails to be read is treated as unchanged (the resync still comes).
    ``sleep`` and ``clock`` are injected."""

    def __init__(
        self,
        names: Collection[str],
        count: Callable[[str], int | None],
        *,
        poll: float = 2.0,
        sleep: Callable[[float], None],
        clock: Callable[[], float],
        stop: Callable[[], bool] = lambda: False,
    ):
        self.names = list(names)
        self.count = count
        self.poll, self.sleep, self.clock, self._stop = poll, sleep, clock, stop
        self.seen: dict[str, int | None] = {n: self._count(n) for n in self.names}

    def _count(self, name: str) -> int | None:
        try:
            return self.count(name)
        except Exception as exc:  # the webhook is a hint: a failed read waits for the next poll or resync
            log.debug("webhook of %s not read: %s", name, exc)
            return None

    def __call__(self, timeout: float) -> dict[str, set[str]] | None:
        deadline = self.clock() + timeout
        while not self._stop():
            fired = {}
            for name in self.names:
                now = self._count(name)
                before = self.seen.get(name)
                if now is not None and before is not None and now != before:
                    fired[name] = {TRIGGER}
                if now is not None:
                    self.seen[name] = now
            left = deadline - self.clock()
            if fired or left <= 0:
                return fired
            self.sleep(min(self.poll, left))
        return None

    def single(self, name: str) -> Events:
        """Events for one source's ``Watch``."""

        def events(timeout: float) -> set[str] | None:
            got = self(timeout)
            return None if got is None else got.get(name, set())

        return events


def _ignored(path: str) -> bool:
    parts = path.replace("\\", "/").split("/")
    return any(p.startswith(".") for p in parts if p not in (".", ".."))
