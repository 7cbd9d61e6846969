"""The reconcile loop (``astra watch``): keep the cluster equal to the files, in named steps.

* ``steps``: ``Reconciler``, one source's pass (load → validate → render → plan → apply → prune,
  a remote's fetch first), its status reasons and backoff; ``RemoteOrigin``;
* ``watch``: ``Watch`` (one source, from file events or webhooks and a resync), ``Fleet``
  (several sources of ``astra.yaml`` in one loop), ``FileEvents``, ``HookEvents``, ``TRIGGER``.

Must not touch: the control plane (clusters only through their protocol), the CLI.
"""

from __future__ import annotations

from .steps import BACKOFF_BASE, BACKOFF_MAX, JITTER, Origin, Reason, Reconciler, RemoteOrigin, State
from .watch import TRIGGER, Events, FileEvents, Fleet, HookEvents, Watch

__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_MAX",
    "JITTER",
    "TRIGGER",
    "Events",
    "FileEvents",
    "Fleet",
    "HookEvents",
    "Origin",
    "Reason",
    "Reconciler",
    "RemoteOrigin",
    "State",
    "Watch",
]
