"""Delivery: events become queued messages (the outbox, in the store), and queued messages are
sent, retried and given up, by a task of their own.

``Delivery(store, secrets, clock=…)``:

* ``notice(events)`` queues a message of each event for each alert that selects it
  (``rules.matches``); the store queues a (workspace, alert, key) once. It is what an API route
  calls (a source's status written: ``source_event``), and costs one read of the rules and one
  write: nothing is sent in the caller's time.
* ``step()`` reads the run events the scheduler recorded since the last step (``events`` table,
  from the store's cursor: the scheduler is never called and never waits) and queues theirs,
  then sends what is due. It returns when it next has something to do. The server runs it in
  a thread of its own (``DeliveryTask``), so a sink that hangs holds only that thread, for at
  most ``sinks.TIMEOUT`` a send.

A send that fails (an error, a timeout, 5xx, 429) is tried again after ``delay(attempts)``:
``BACKOFF_BASE`` · 2^(n−1) seconds, at most ``BACKOFF_MAX``, ±``JITTER`` (the reconcile loop's
backoff and its jitter; the clock is injected so tests run it on a simulated clock, which
stamina's own sleeping would not allow); a 429's ``Retry-After`` is waited instead when it
says more. After ``MAX_ATTEMPTS`` sends, or at once for a refusal no retry can fix (4xx; a
secret not set), the message gives up: its answer is kept and an ``alert.gave_up`` event is
noticed (sent by the other alerts that select it, never by the one that gave up).

A message's event (its text) is kept as it was queued: every retry sends the same bytes but the
webhook's timestamp and signature. Across a restart nothing queued is lost (it is in the store)
and nothing recorded as sent is sent again. Each send is recorded before it starts (its attempt,
and ``SENDING`` as its answer): a server killed during one send's call leaves that message
queued with no answer, and the next server sends it again, saying so in its answer
(``CUT_OFF``). The receiver may then have seen it twice, but has accepted (answered 2xx to)
only the one it answered, since the first sender never got an answer; the webhook's
``Idempotency-Key`` lets a receiver tell the two apart.

``step()`` also follows the runs waiting on their workspace's quota (``waits``: from the same
events, rebuilt from the store at the first step) and queues ``run.quota_wait`` for each wait
that has lasted an alert's ``waited``.

Must not touch: the scheduler, the engine, HTTP routes.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from ..scopes import scope_of, shown
from . import sinks
from .rules import Alert, Event, gave_up_event, matches, quota_event, restart_event, run_event
from .waits import QUOTA_LIKE, QuotaWaits, Wait, is_quota_reason, rebuild

__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_MAX",
    "CUT_OFF",
    "JITTER",
    "MAX_ATTEMPTS",
    "SENDING",
    "Delivery",
    "DeliveryTask",
]

log = logging.getLogger(__name__)

BACKOFF_BASE = 2.0
BACKOFF_MAX = 300.0
JITTER = 0.1
#: Sends of one message before it gives up.
MAX_ATTEMPTS = 6
#: The longest ``Retry-After`` waited (a longer one is waited this long).
RETRY_AFTER_MAX = 3600.0
#: A message's answer while a send of it is under way (recorded before the send).
SENDING = "sending: no answer yet"
#: Said with the answer of a send that follows one a server's end cut off.
CUT_OFF = "attempt {n} got no answer: the server stopped during it"


class Delivery:
    """The outbox's two halves (see the module docstring)."""

    def __init__(
        self,
        store: Any,
        secrets: sinks.Secrets,
        *,
        clock: Callable[[], float],
        rng: random.Random | None = None,
        send: Callable[[sinks.Outgoing], sinks.Answer] = sinks.send,
        link: Callable[[Event], str | None] = lambda event: None,
        counted: Callable[[str, str], None] = lambda sink, result: None,
    ):
        """``counted(sink kind, result)``: told of each try's end (``sent``, ``retried``,
        ``gave_up``): what ``/metrics`` counts (``astra_alert_deliveries_total``)."""
        self.store, self.secrets, self.clock = store, secrets, clock
        self.rng = rng or random.Random()
        self.send = send
        self.link = link
        self.counted = counted
        #: the runs waiting on their quota (``waits``), rebuilt from the store at the first step
        self.waits: QuotaWaits | None = None

    def delay(self, attempts: int) -> float:
        base = min(BACKOFF_MAX, BACKOFF_BASE * 2 ** (attempts - 1))
        return base * (1 + JITTER * (2 * self.rng.random() - 1))

    def notice(self, events: Iterable[Event], rules: list[Alert] | None = None) -> int:
        """Queue each event for each alert that selects it (of ``rules``, read from the store if
        not given); how many messages were queued."""
        events = list(events)
        if not events:
            return 0
        if rules is None:
            rules = [Alert.from_json(r) for r in self.store.alert_rules()]
        messages = [(a.workspace, a.name, e.key, e.to_json()) for e in events for a in rules if matches(a, e)]
        return self.store.enqueue(messages, self.clock()) if messages else 0

    def read_events(self) -> int:
        """Queue the messages of the run events recorded since the cursor; how many."""
        rows, cursor = self.store.events_after()
        if self.waits is None:
            waiting = self.store.runs_waiting("Pending", QUOTA_LIKE)
            self.waits = rebuild(self.store.event_rows(run) for run in waiting)
        self.waits.see(rows)
        # with no alert at all, no event would be queued: none is made (each reads its run's
        # row for the labels, a read of the store per event the scheduler records)
        rules = [Alert.from_json(r) for r in self.store.alert_rules()] if rows else []
        found = []
        for row in rows if rules else ():
            if row.get("worker") is None and row.get("state"):
                event = self._run_event(row)
                if event is not None:
                    found.append(event)
            elif row.get("kind") == "RequeueWorker":
                found.append(self._restart_event(row))
        queued = self.notice(found, rules)
        if rows:
            self.store.move_cursor(cursor)
        return queued + self._quota_waits()

    def _quota_waits(self) -> int:
        """Queue the messages of the quota waits that have lasted an alert's ``waited``; a wait
        the store says is over (the run deleted, or no longer waiting on its quota) is dropped."""
        assert self.waits is not None
        if not self.waits.open:
            return 0
        rules = [Alert.from_json(r) for r in self.store.alert_rules()]
        limits = {a.waited for a in rules if not a.events or "run.quota_wait" in a.events}
        due = self.waits.due(self.clock(), limits)
        events = []
        for wait, seconds in due:
            row = self.store.run_row(wait.run)
            if row is None or row["state"] != "Pending" or not is_quota_reason(row["reason"]):
                self.waits.drop(wait.run)
                continue
            events.append(self._quota_event(wait, seconds, str(row["reason"])))
        queued = self.notice(events)
        self.waits.told.update((w.key, t) for w, t in due)
        return queued

    def _quota_event(self, wait: Wait, seconds: int, reason: str) -> Event:
        scope = scope_of(wait.run)
        event = quota_event(
            scope.workspace_key,
            (shown(wait.run), f"{shown(wait.run)}/{wait.first}", seconds),
            reason,
            self._labels(wait.run),
            self.clock(),
        )
        event = replace(event, cluster=scope.cluster)
        return replace(event, link=self.link(event))

    def _labels(self, key: str) -> dict[str, str]:
        stored = self.store.run_row(key)
        if stored is None:
            return {}
        return dict(json.loads(stored["document"]).get("metadata", {}).get("labels") or {})

    def _restart_event(self, row: dict[str, Any]) -> Event:
        key, worker = str(row["run"]), str(row["worker"])
        scope = scope_of(key)
        count = self.store.worker_restarts(worker, int(row["id"]))
        event = restart_event(
            scope.workspace_key,
            (shown(key), shown(worker), count),
            str(row.get("reason") or ""),
            self._labels(key),
            float(row["at"]),
        )
        event = replace(event, cluster=scope.cluster)
        return replace(event, link=self.link(event))

    def _run_event(self, row: dict[str, Any]) -> Event | None:
        key = str(row["run"])
        scope = scope_of(key)
        labels = self._labels(key)
        event = run_event(
            scope.workspace_key,
            shown(key),
            str(row["state"]),
            str(row.get("reason") or ""),
            labels,
            float(row["at"]),
            None,
        )
        if event is None:
            return None
        event = replace(event, cluster=scope.cluster)
        return replace(event, link=self.link(event))

    def step(self) -> float | None:
        """Queue the new run events' messages, send what is due; when it is next due."""
        self.read_events()
        for message in self.store.due_messages(self.clock()):
            self._deliver(message)
        return self.store.next_message_at()

    def _deliver(self, message: dict[str, Any]) -> None:
        event = Event.from_json(json.loads(message["event"]))
        rules = {(r["workspace"], r["name"]): r for r in self.store.alert_rules(message["workspace"])}
        rule = rules.get((message["workspace"], message["alert"]))
        attempts = int(message["attempts"]) + 1
        now = self.clock()
        if rule is None:
            self.store.message_done(message["id"], "gave_up", attempts, now, "the alert was deleted", now)
            return
        alert = Alert.from_json(rule)
        try:
            out = sinks.outgoing(dict(alert.sink), event, self.secrets, now)
        except sinks.SinkError as exc:
            self._give_up(message, alert, event, attempts, str(exc))
            return
        if out is None:  # nothing to send (a commit status of an event without a commit)
            self.store.message_done(message["id"], "sent", attempts, now, "nothing to send", now)
            return
        self.store.message_sending(message["id"], attempts, SENDING)
        answer = self.send(out)
        if str(message["answer"]).startswith(SENDING):  # the last send was cut off by a restart
            answer = replace(answer, words=f"{answer.words} ({CUT_OFF.format(n=attempts - 1)})")
        now = self.clock()
        if answer.sent:
            self.store.message_done(message["id"], "sent", attempts, now, answer.words, now)
            self.counted(str(alert.sink.get("kind")), "sent")
        elif answer.retry and attempts < MAX_ATTEMPTS:
            wait = self.delay(attempts)
            if answer.after is not None:
                wait = max(wait, min(answer.after, RETRY_AFTER_MAX))
            self.store.message_done(message["id"], "queued", attempts, now + wait, answer.words, now)
            self.counted(str(alert.sink.get("kind")), "retried")
        else:
            self._give_up(message, alert, event, attempts, answer.words)

    def _give_up(self, message: dict[str, Any], alert: Alert, event: Event, attempts: int, why: str) -> None:
        now = self.clock()
        self.store.message_done(message["id"], "gave_up", attempts, now, why, now)
        self.counted(str(alert.sink.get("kind")), "gave_up")
        log.warning("alert %s gave up on %s: %s", alert.name, event.key, why)
        if event.kind != "alert.gave_up":
            self.notice([gave_up_event(alert, event, why, now)])


class DeliveryTask:
    """``Delivery.step`` in a daemon thread of its own, every ``every`` seconds at most (sooner
    when woken: ``wake()``, after a message is queued); ``stop()`` ends it."""

    def __init__(self, delivery: Delivery, *, every: float = 1.0):
        self.delivery, self.every = delivery, every
        self._wake = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="astra-alerts", daemon=True)

    def start(self) -> DeliveryTask:
        self._thread.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop = True
        self._wake.set()
        self._thread.join(timeout=sinks.TIMEOUT + 1)

    def _run(self) -> None:
        while not self._stop:
            try:
                self.delivery.step()
            except Exception:  # a failed step is logged; the next one tries again
                log.exception("alerts: a delivery step failed")
            self._wake.wait(self.every)
            self._wake.clear()
