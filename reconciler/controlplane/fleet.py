"""Several clusters served by one server: ``astra server --inventory NAME=FILE`` (repeatable).

Owns: ``cluster_files`` (the ``--inventory`` values read as a cluster's name and its file; a
value without ``NAME=`` is the default cluster's, as before clusters had names) and ``Fleet``
(each cluster's engine and executor, stepped together by the server's loop as one: ``step``,
``next_wakeup``, ``queued``, ``more``, ``busy``, ``shutdown``).

Each cluster has its own engine and executor over the one store (``Engine(cluster=NAME)``): its
own machines, runs, workers and quotas; the ``clusters/{cluster}`` part of a workspace's path
picks it (``api.context.admit``). Must not touch: HTTP, SQL, the scheduler's rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .scopes import DEFAULT, is_name

__all__ = ["Fleet", "cluster_files"]


def cluster_files(values: Iterable[str]) -> dict[str, str]:
    """``{cluster: file}`` from ``--inventory`` values (``NAME=FILE``, or ``FILE`` for the default
    cluster); ``ValueError`` in words for a cluster named twice or a name that is not one."""
    found: dict[str, str] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or "/" in name or not name:
            name, path = DEFAULT, value
        elif not is_name(name):
            raise ValueError(
                f"--inventory {value}: {name!r} is not a cluster's name (lowercase letters, digits, '-')"
            )
        if name in found:
            raise ValueError(f"--inventory names cluster {name} twice")
        found[name] = path
    return found


@dataclass
class Fleet:
    """Each cluster's (engine, executor), stepped as one by the server's loop."""

    members: dict[str, tuple[Any, Any]]

    def step(self, now: float, *, start: bool = True) -> None:
        for engine, _ in self.members.values():
            engine.step(now, start=start)

    def start_processes(self) -> int:
        return sum(engine.start_processes() for engine, _ in self.members.values())

    def next_wakeup(self, now: float) -> float | None:
        due = [t for engine, _ in self.members.values() if (t := engine.next_wakeup(now)) is not None]
        return min(due) if due else None

    @property
    def queued(self) -> bool:
        return any(getattr(executor, "queued", None) for _, executor in self.members.values())

    @property
    def more(self) -> bool:
        return any(engine.more for engine, _ in self.members.values())

    @property
    def busy(self) -> bool:
        return any(executor.busy for _, executor in self.members.values())

    def shutdown(self) -> None:
        for _, executor in self.members.values():
            executor.shutdown()
