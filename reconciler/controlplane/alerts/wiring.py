"""The alerts' delivery as the server runs it: its secrets and its links.

``store_secrets(store)``: the sinks' ``Secrets`` read from the workspace's secret store
(``Store.secret_value(name, workspace)``, the secrets issue's one reader of a value in the
clear). A store without it (this branch, before that store is merged) gives a sink no secret,
and says so in words: the message gives up with that reason, and an ``alert.gave_up`` event.

``run_link(root)``: a run event's link, the run's console page (``/o/ORG/w/WS/jobs/CLUSTER/RUN``).

Must not touch: what a sink sends (``sinks``), the outbox (``delivery``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .rules import Event
from .sinks import Secrets, SinkError

__all__ = ["run_link", "store_secrets"]


def store_secrets(store: Any) -> Secrets:
    """The sinks' secrets, from ``store.secret_value`` (see the module docstring)."""
    read = getattr(store, "secret_value", None)

    def secrets(workspace: str, name: str) -> bytes | None:
        if read is None:
            raise SinkError(f"secret {name}: this server keeps no secrets ('astra secret set' is not in it)")
        value = read(name, workspace)
        return None if value is None else bytes(value)

    return secrets


def run_link(root: str) -> Callable[[Event], str | None]:
    """A run event's console page under ``root`` (the server's URL)."""

    def link(event: Event) -> str | None:
        if event.run is None:
            return None
        org, _, workspace = event.workspace.partition("/")
        return f"{root.rstrip('/')}/o/{org}/w/{workspace}/jobs/{event.cluster}/{event.run}"

    return link
