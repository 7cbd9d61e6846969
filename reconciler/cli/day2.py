"""What the day-2 commands (``get``, ``describe``, ``logs``, ``delete``, ``rerun``) share: the
cluster they talk to, and one line (exit 1) for whatever goes wrong. Without typer: the reads
typed all day run by the plain argv route (``cli/__init__.py``); their options are
``flags``'s.

Must not touch: what any command shows (``runviews``), the clusters' insides.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .output import error
from .runviews import CommandFailed

__all__ = ["clock", "failing", "open_cluster", "sleep", "slurm_named"]


def clock() -> float:
    """Now, in seconds since the epoch (tests replace it: the simulated clock)."""
    return time.time()


def sleep(seconds: float) -> None:
    """Wait between two looks at the cluster (tests replace it: the simulated clock moves on)."""
    time.sleep(seconds)


def open_cluster(server: str | None, token: str | None, *, start: bool = False) -> Any:
    """The cluster ``--server`` names (``reconciler.cli.connect``); a command that only reads
    never starts the local one."""
    from . import connect as chosen  # looked up at the call: tests put a fake cluster there

    return chosen.connect(server, token, start=start)


def slurm_named(server: str | None) -> Any:
    """The Slurm cluster ``server`` names (``--server slurm://…``), or ``None`` for any other
    server: the verbs that keep their own store there (``drive``, ``secret``) call it instead."""
    if not (server or "").startswith("slurm://"):
        return None
    with failing():
        return open_cluster(server, None)


@contextmanager
def failing() -> Iterator[None]:
    """The cluster's errors and ``CommandFailed`` as one line and exit 1 (``planning.Exit``,
    which both routes into a command end with: ``guard.guarded``)."""
    from ..clusters.base import ClusterError

    try:
        yield
    except (ClusterError, CommandFailed) as exc:
        from .planning import Exit

        error(str(exc))
        raise Exit(1) from exc
