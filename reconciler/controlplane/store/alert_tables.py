"""The alerts' tables: the rules (``alerts``), the outbox of messages (``alert_outbox``) and how
far the events were read (``alert_cursor``). Built by revision ``0008_alerts``.

Must not touch: connections, transactions (``alerts``).
"""

from __future__ import annotations

from sqlalchemy import UniqueConstraint
from sqlmodel import Column, Field, Text

from .tables import StoreTable, table_of

__all__ = ["ALERTS", "ALERT_CURSOR", "ALERT_OUTBOX", "AlertCursorRow", "AlertOutboxRow", "AlertRow"]


class AlertRow(StoreTable, table=True):
    """An alert of a workspace (``ORG/WORKSPACE``): its rule as JSON (``rules.Alert``)."""

    __tablename__ = "alerts"
    workspace: str = Field(primary_key=True)
    name: str = Field(primary_key=True)
    rule: str = Field(sa_column=Column(Text, nullable=False))
    created_at: float


class AlertOutboxRow(StoreTable, table=True):
    """One message of one alert: its event (JSON, with the text made once), its state
    (``queued``, ``sent``, ``gave_up``), attempts, when it is next tried, the last answer."""

    __tablename__ = "alert_outbox"
    __table_args__ = (UniqueConstraint("workspace", "alert", "key", name="alert_outbox_once"),)
    id: int | None = Field(default=None, primary_key=True)
    workspace: str = Field(index=True)
    alert: str
    key: str
    event: str = Field(sa_column=Column(Text, nullable=False))
    state: str = Field(index=True)
    attempts: int
    next_at: float
    created_at: float
    done_at: float | None = None
    answer: str = ""


class AlertCursorRow(StoreTable, table=True):
    """The id of the last event (``events``) the alerts have read (one row, ``id`` 1)."""

    __tablename__ = "alert_cursor"
    id: int = Field(primary_key=True)
    event_id: int


ALERTS = table_of(AlertRow)
ALERT_OUTBOX = table_of(AlertOutboxRow)
ALERT_CURSOR = table_of(AlertCursorRow)
