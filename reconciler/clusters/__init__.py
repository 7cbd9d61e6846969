"""Clusters: the ``Cluster`` protocol and its implementations (``http``, ``slurm``, a fake).

The reconciler talks to clusters only through the protocol in ``base``; it never imports the
control plane's internals.
"""

from __future__ import annotations

from .base import (
    Cluster,
    ClusterError,
    Conflict,
    LiveRun,
    NotFound,
    Rejected,
    RunSummary,
    Unreachable,
    WorkerInfo,
    summaries,
)

__all__ = [
    "Cluster",
    "ClusterError",
    "Conflict",
    "LiveRun",
    "NotFound",
    "Rejected",
    "RunSummary",
    "Unreachable",
    "WorkerInfo",
    "summaries",
]
