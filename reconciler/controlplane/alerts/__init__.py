"""Alerts: tell people what matters, and post each commit's status back to its git host.

* ``rules``: the events (``Event``: kinds, severities, one key per message) and the alerts'
  rules (``Alert``, ``matches``), pure;
* ``sinks``: what each sink sends (webhook, Slack-compatible, e-mail, GitHub and GitLab commit
  statuses) and how its answer is read; secrets by name, through ``Secrets``;
* ``delivery``: the outbox in the store, sent by a task of its own (``Delivery``,
  ``DeliveryTask``), with backoff, ``Retry-After``, a limit and an event when it gives up.

Must not touch: the scheduler's decisions, the reconcile loop (it is told through the source
status it writes to the API).
"""

from __future__ import annotations

from .delivery import Delivery, DeliveryTask
from .rules import KINDS, Alert, Event, matches
from .sinks import SCHEMA, SINKS, Secrets, SinkError

__all__ = [
    "KINDS",
    "SCHEMA",
    "SINKS",
    "Alert",
    "Delivery",
    "DeliveryTask",
    "Event",
    "Secrets",
    "SinkError",
    "matches",
]
