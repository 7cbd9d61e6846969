"""The alerts of the store: the rules, the outbox of their messages, and the events' cursor.

Owns the writes and reads of ``alerts``, ``alert_outbox`` and ``alert_cursor`` (``KeptAlerts``,
the part of ``Store`` that serves them). The outbox is the queue of messages to send: a message
is queued once per (workspace, alert, event key) (the table's unique constraint: an event
noticed twice, by a retried request or after a restart, is not queued again), holds its text
as it was made, and moves ``queued`` → ``sent`` or ``gave_up`` in one transaction each. It is
bounded (``OUTBOX_MAX`` queued messages): beyond, a message is not queued and ``enqueue`` says
so. Being in the database, it survives a restart: what was queued and not sent is sent after,
what was sent is never sent again.

Must not touch: runs, workers (``facade``), what a message says or how it is sent (``alerts/``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete, func, insert, or_, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from .alert_tables import ALERT_CURSOR, ALERT_OUTBOX, ALERTS
from .errors import NotFound
from .tables import EVENTS, RUNS

__all__ = ["OUTBOX_MAX", "KeptAlerts"]

#: The most messages queued (not yet sent or given up) at once, over every workspace.
OUTBOX_MAX = 10_000


class KeptAlerts:
    """The alerts' part of ``Store``: every method is one transaction on ``self.engine``."""

    engine: Engine

    # ---- the rules ---------------------------------------------------------------------------

    def put_alert(self, workspace: str, name: str, rule: dict[str, Any], now: float) -> bool:
        """Create or replace an alert's rule; whether it was new."""
        a = ALERTS
        with self.engine.begin() as conn:
            done = conn.execute(
                update(a).where(a.c.workspace == workspace, a.c.name == name).values(rule=json.dumps(rule))
            ).rowcount
            if not done:
                conn.execute(
                    insert(a).values(workspace=workspace, name=name, rule=json.dumps(rule), created_at=now)
                )
        return not done

    def alert_rules(self, workspace: str | None = None) -> list[dict[str, Any]]:
        """The rules (of ``workspace``, or all), by workspace and name."""
        q = select(ALERTS).order_by(ALERTS.c.workspace, ALERTS.c.name)
        if workspace is not None:
            q = q.where(ALERTS.c.workspace == workspace)
        with self.engine.connect() as conn:
            return [json.loads(r["rule"]) for r in conn.execute(q).mappings()]

    def delete_alert(self, workspace: str, name: str) -> None:
        """Forget an alert (its history stays); ``NotFound`` when there is none."""
        a = ALERTS
        with self.engine.begin() as conn:
            if not conn.execute(delete(a).where(a.c.workspace == workspace, a.c.name == name)).rowcount:
                raise NotFound(f"no alert named {name}")

    # ---- the outbox --------------------------------------------------------------------------

    def enqueue(self, messages: Iterable[tuple[str, str, str, dict[str, Any]]], now: float) -> int:
        """Queue ``(workspace, alert, key, event)`` messages not queued before; how many were.
        A message past ``OUTBOX_MAX`` is not queued (the caller logs it)."""
        o = ALERT_OUTBOX
        queued = 0
        with self.engine.begin() as conn:
            waiting = (
                conn.execute(select(func.count()).select_from(o).where(o.c.state == "queued")).scalar() or 0
            )
            for workspace, alert, key, event in messages:
                if waiting + queued >= OUTBOX_MAX:
                    break
                row = dict(
                    workspace=workspace,
                    alert=alert,
                    key=key,
                    event=json.dumps(event, sort_keys=True),
                    state="queued",
                    attempts=0,
                    next_at=now,
                    created_at=now,
                    answer="",
                )
                try:
                    with conn.begin_nested():
                        conn.execute(insert(o).values(**row))
                except IntegrityError:
                    continue  # queued before: one message per key
                queued += 1
        return queued

    def due_messages(self, now: float, limit: int = 50) -> list[dict[str, Any]]:
        """Queued messages whose time has come, oldest first."""
        o = ALERT_OUTBOX
        q = (
            select(o)
            .where(o.c.state == "queued", o.c.next_at <= now)
            .order_by(o.c.next_at, o.c.id)
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(q).mappings()]

    def next_message_at(self) -> float | None:
        """When the next queued message is due (``None``: none is queued)."""
        o = ALERT_OUTBOX
        with self.engine.connect() as conn:
            return conn.execute(select(func.min(o.c.next_at)).where(o.c.state == "queued")).scalar()

    def message_done(
        self, id: int, state: str, attempts: int, next_at: float, answer: str, now: float
    ) -> None:
        """Record a send's outcome: ``queued`` again (at ``next_at``), ``sent`` or ``gave_up``."""
        o = ALERT_OUTBOX
        done = None if state == "queued" else now
        with self.engine.begin() as conn:
            conn.execute(
                update(o)
                .where(o.c.id == id)
                .values(state=state, attempts=attempts, next_at=next_at, answer=answer[:500], done_at=done)
            )

    def message_sending(self, id: int, attempts: int, answer: str) -> None:
        """Record that a send of a queued message starts (its ``attempts``, and ``answer`` until
        the sink's own): a server that dies before the answer leaves it so, for the next to
        say and send again."""
        o = ALERT_OUTBOX
        with self.engine.begin() as conn:
            conn.execute(update(o).where(o.c.id == id).values(attempts=attempts, answer=answer[:500]))

    def alert_history(
        self, workspace: str, alert: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """The workspace's messages (of ``alert``), newest first."""
        o = ALERT_OUTBOX
        q = select(o).where(o.c.workspace == workspace).order_by(o.c.id.desc()).limit(limit)
        if alert is not None:
            q = q.where(o.c.alert == alert)
        with self.engine.connect() as conn:
            return [{**dict(r), "event": json.loads(r["event"])} for r in conn.execute(q).mappings()]

    # ---- the events' cursor ------------------------------------------------------------------

    def events_after(self, limit: int = 500) -> tuple[list[dict[str, Any]], int]:
        """The run events after the cursor (at most ``limit``), and the cursor they lead to. A new
        store's cursor starts at the newest event: what happened before alerts were read is not told."""
        c, e = ALERT_CURSOR, EVENTS
        with self.engine.begin() as conn:
            at = conn.execute(select(c.c.event_id).where(c.c.id == 1)).scalar()
            if at is None:
                at = conn.execute(select(func.max(e.c.id))).scalar() or 0
                conn.execute(insert(c).values(id=1, event_id=at))
            rows = [
                dict(r)
                for r in conn.execute(select(e).where(e.c.id > at).order_by(e.c.id).limit(limit)).mappings()
            ]
        return rows, rows[-1]["id"] if rows else at

    def worker_restarts(self, worker: str, upto: int) -> int:
        """How many times ``worker`` was requeued (restarted) in the events up to id ``upto``."""
        e = EVENTS
        q = select(func.count()).where(e.c.worker == worker, e.c.kind == "RequeueWorker", e.c.id <= upto)
        with self.engine.connect() as conn:
            return int(conn.execute(q).scalar() or 0)

    def runs_waiting(self, state: str, reasons: Iterable[str]) -> list[str]:
        """The runs in ``state`` whose reason is like one of ``reasons`` (SQL ``LIKE`` patterns):
        read once when the delivery starts (the quota waits it follows, ``alerts.waits``)."""
        r = RUNS
        q = select(r.c.name).where(r.c.state == state, or_(*(r.c.reason.like(p) for p in reasons)))
        with self.engine.connect() as conn:
            return sorted(str(n) for n in conn.execute(q).scalars())

    def move_cursor(self, event_id: int) -> None:
        """The events up to ``event_id`` are read (their messages queued)."""
        c = ALERT_CURSOR
        with self.engine.begin() as conn:
            conn.execute(update(c).where(c.c.id == 1).values(event_id=event_id))
