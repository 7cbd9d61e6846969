"""The runs on a schedule of one engine, ticked on its clock: ``ScheduleBook``.

A run with ``spec.schedule`` is a template, as a Kubernetes CronJob is: the scheduler never
admits it, so it holds no workers (it is Pending, ``Waiting for its schedule …``:
``runspec.schedules.waiting_words``), and at each time of its cron
the engine makes the run ``<name>-<YYYYMMDD-HHMM>`` (the time in the schedule's timezone) from
its document (``runspec.schedules.made_document``: the spec less the schedule, the label
``astra.schedule: <name>``, none of the source's annotations, so no source owns it). What to do
at a tick is ``schedules.decide``'s (pure); this module carries it out with the engine's own
writes (``submit``, a cancel, ``delete``) and keeps, in the store (``schedules``), what a
schedule needs across ticks and restarts: the latest time acted on, CronJob's
``lastScheduleTime`` and ``lastSuccessfulTime``, and its suspension.

* A time missed while the server was down starts once (the latest of them), at the first tick.
* Suspended: no run is made, and the time acted on stays; at resume, the times missed while it
  was suspended start once (the latest), as a CronJob without ``startingDeadlineSeconds``.
* A run on a schedule that ended (cancelled, or failed: it can never fit) makes no more runs.
* Deleting the run on a schedule leaves the runs it made (``kubectl delete --cascade=orphan``):
  a GitOps replace of it (its cron changed) stops nothing.

Made runs are found by their label (``note``: every run the engine makes or loads is shown to
the book). Must not touch: HTTP, SQL (the ``Store``'s), the scheduler's rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from reconciler.runspec.errors import InvalidSpec
from reconciler.runspec.schedules import KEEP_DEFAULT, MADE_BY, made_document, next_time
from reconciler.runspec.vocabulary import FINAL_RUN_STATES, RunState

from .scheduler import CancelRun
from .schedules import Made, Schedule, decide
from .scopes import run_key, scope_of, shown
from .store import NameExists

if TYPE_CHECKING:
    from .engine import Engine

__all__ = ["ScheduleBook"]


class ScheduleBook:
    """The runs on a schedule of ``engine``, their rows (``store.schedules``), the runs they made."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        #: the kept state of each schedule of this cluster, by its run's key; kept after the run
        #: is deleted, so that one made again under its name (an apply's replace) keeps its suspension
        self.rows: dict[str, dict[str, Any]] = {
            k: r for k, r in engine.store.schedule_rows().items() if scope_of(k).cluster == engine.cluster
        }
        #: the runs on a schedule (keys), and each one's runs made (keys), by their label
        self.templates: dict[str, None] = {}
        self.made: dict[str, dict[str, None]] = {}
        #: when each schedule next fires after the time acted on (kept: croniter costs)
        self._due: dict[str, float] = {}

    def note(self, names: Iterable[str]) -> None:
        """Learn which of ``names`` (runs made or loaded) are on a schedule, or made by one."""
        meta = self.engine.meta
        for name in names:
            m = meta.get(name)
            if m is None:
                continue
            if "schedule" in m.document["spec"]:
                self.templates[name] = None
                self._due.pop(name, None)
            by = (m.document["metadata"].get("labels") or {}).get(MADE_BY)
            if isinstance(by, str):
                self.made.setdefault(run_key(scope_of(name), by), {})[name] = None

    # -- the tick ------------------------------------------------------------------------------

    def tick(self, now: float) -> None:
        """Carry out each schedule's decision at ``now`` (``schedules.decide``)."""
        for key in list(self.templates):
            meta = self.engine.meta.get(key)
            if meta is None or "schedule" not in meta.document["spec"]:
                self._forget(key)
                continue
            if self.engine.state.runs[key].state not in FINAL_RUN_STATES:
                self._tick_one(key, now)

    def _forget(self, key: str) -> None:
        """``key`` is no run on a schedule any more (its row stays: ``rows``)."""
        self.templates.pop(key, None)
        self._due.pop(key, None)

    def _tick_one(self, key: str, now: float) -> None:
        engine, row = self.engine, self.row(key)
        schedule = self.schedule(key)
        made = self._made(key)
        finished = sum(1 for m in made if m.finished)
        due = self.due(key)
        if (schedule.suspended or now < due) and finished <= schedule.keep:
            self._successes(key, row)
            return
        tick = decide(schedule, row["acted_at"], now, made)
        for name in tick.delete:
            engine.delete(name, now)
            self.made[key].pop(name, None)
        for name in tick.stop:
            engine.observe(CancelRun(name), now)
        events = []
        if tick.create is not None:
            events.append(self._make(key, tick.create, now))
            row["last_schedule_at"] = tick.at
        if tick.skipped is not None:
            events.append(_event(now, key, "ScheduleSkipped", tick.skipped))
        if tick.acted is not None:
            row["acted_at"] = tick.acted
            self._due.pop(key, None)
        self._successes(key, row)
        if events or tick.acted is not None:
            engine.store.put_schedule(row, events)

    def _make(self, key: str, name: str, now: float) -> dict[str, Any]:
        """Make the run ``name`` of the run on a schedule ``key``; the event that says so."""
        scope = scope_of(key)
        short = key.removeprefix(scope.prefix)
        document = made_document(self.engine.meta[key].document, name, short)
        try:
            self.engine.submit(document, now, scope)
        except NameExists:
            return _event(now, key, "ScheduleMade", f"{name} exists already: it is not made again")
        except InvalidSpec as exc:
            return _event(now, key, "ScheduleFailed", f"{name} cannot be made: {exc}")
        return _event(now, key, "ScheduleMade", f"made run {name}")

    def _made(self, key: str) -> list[Made]:
        """The runs ``key`` made that are still there (those gone are forgotten)."""
        runs, meta = self.engine.state.runs, self.engine.meta
        mine = self.made.get(key, {})
        for name in [n for n in mine if n not in runs]:
            del mine[name]
        return [Made(n, meta[n].created_at, runs[n].state in FINAL_RUN_STATES) for n in mine]

    def _successes(self, key: str, row: dict[str, Any]) -> None:
        """``lastSuccessfulTime``: when a run ``key`` made last completed (kept when it moves)."""
        runs, meta = self.engine.state.runs, self.engine.meta
        ends = [
            at
            for n in self.made.get(key, {})
            if n in runs and runs[n].state is RunState.COMPLETED and (at := meta[n].finished_at) is not None
        ]
        latest = max(ends, default=None)
        if latest is not None and (row["last_successful_at"] or 0.0) < latest:
            row["last_successful_at"] = latest
            self.engine.store.put_schedule(row)

    # -- what a schedule is now ----------------------------------------------------------------

    def row(self, key: str) -> dict[str, Any]:
        """The kept state of run ``key``'s schedule; a new one (from when the run was made) for a
        run made since, or again under its name (its suspension is carried over)."""
        created = self.engine.meta[key].created_at
        row = self.rows.get(key)
        if row is None or row["run_created_at"] != created:
            held = row or {}
            row = self.rows[key] = {
                "run": key,
                "run_created_at": created,
                "acted_at": created,
                "last_schedule_at": None,
                "last_successful_at": None,
                "suspended": bool(held.get("suspended")),
                "suspended_at": held.get("suspended_at"),
                "suspended_by": held.get("suspended_by"),
            }
            self._due.pop(key, None)
        return row

    def schedule(self, key: str) -> Schedule:
        given = self.engine.meta[key].document["spec"]["schedule"]
        scope = scope_of(key)
        return Schedule(
            key.removeprefix(scope.prefix),
            given["cron"],
            given.get("timezone", "UTC"),
            given.get("concurrency", "Forbid"),
            given.get("keep", KEEP_DEFAULT),
            bool(self.row(key)["suspended"]),
        )

    def due(self, key: str) -> float:
        """When ``key``'s schedule next fires after the time it last acted on."""
        found = self._due.get(key)
        if found is None:
            given = self.engine.meta[key].document["spec"]["schedule"]
            found = self._due[key] = next_time(
                given["cron"], given.get("timezone", "UTC"), self.row(key)["acted_at"]
            )
        return found

    def next_wakeup(self) -> float | None:
        """When the next schedule fires (none suspended, or ended)."""
        runs = self.engine.state.runs
        due = [
            self.due(k)
            for k in self.templates
            if k in runs and runs[k].state not in FINAL_RUN_STATES and not self.row(k)["suspended"]
        ]
        return min(due, default=None)

    def status(self, key: str) -> dict[str, Any] | None:
        """What the API says of run ``key``'s schedule (``wire.ScheduleStatus``); ``None``: it has none."""
        meta = self.engine.meta.get(key)
        if meta is None or "schedule" not in meta.document["spec"]:
            return None
        row, s = self.row(key), self.schedule(key)
        ended = self.engine.state.runs[key].state in FINAL_RUN_STATES
        going = [shown(m.name) for m in self._made(key) if not m.finished]
        nxt = None if s.suspended or ended else self.due(key)  # past: made at the next tick
        return {
            "cron": s.cron,
            "timezone": s.timezone,
            "concurrency": s.concurrency,
            "keep": s.keep,
            "suspended": s.suspended,
            "suspended_at": row["suspended_at"],
            "suspended_by": row["suspended_by"],
            "next_at": nxt,
            "last_schedule_at": row["last_schedule_at"],
            "last_successful_at": row["last_successful_at"],
            "active": going,
        }

    def suspend(self, key: str, by: str | None, now: float, reason: str = "") -> None:
        """Suspend (``by`` someone, for ``reason``) or, with ``by`` ``None``, resume run ``key``'s
        schedule."""
        row = self.row(key)
        row["suspended"], row["suspended_by"] = by is not None, by
        row["suspended_at"] = now if by is not None else None
        if by is not None:
            why = f" ({reason})" if reason else ""
            kind, words = "ScheduleSuspended", f"suspended by {by}{why}: no run is made until it is resumed"
        else:
            kind, words = "ScheduleResumed", "resumed: a time missed while it was suspended starts once"
        self.engine.store.put_schedule(row, [_event(now, key, kind, words)])


def _event(at: float, run: str, kind: str, reason: str) -> dict[str, Any]:
    return {
        "at": at,
        "run": run,
        "worker": None,
        "kind": kind,
        "state": None,
        "reason": reason,
        "machine": None,
        "exit_code": None,
    }
