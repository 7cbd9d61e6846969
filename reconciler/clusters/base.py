"""The ``Cluster`` protocol: how the reconciler sees and changes a cluster, and nothing more.

A cluster lists, gets, creates, updates and deletes runs, and tells about their workers and
logs. It holds no policy: retries, ordering, pruning and ownership live in the reconciler.
Implementations: ``http`` (any Astraeus REST API, e.g. ``astra server``), ``slurm`` (a real
Slurm cluster), and ``FakeCluster`` here, in memory, for tests.

Runs cross this boundary as plain documents (``{"metadata": …, "spec": …}``, the shape of the
seeds' run.json), so a cluster needs nothing of ours but the spec layer. What a cluster reports
(``LiveRun``, ``RunSummary``, ``WorkerInfo``) is defined in the neutral ``reconciler.runs``, which
the plan reads too, and re-exported here.

``summaries(cluster)`` lists every run as a ``RunSummary`` (its status and the digest of its
normalised document, no document): by the cluster's own ``list_run_summaries()`` when it has
one (``http``: ``GET /runs?view=summary``), else derived from ``list_runs()``. The protocol
itself stays as it is.

Exceptions::

    ClusterError              the cluster could not do what was asked (mapped from httpx, subprocess …)
    ├── Unreachable           it could not be reached at all: nothing may be concluded from silence
    ├── NotFound              no run of that name
    ├── Conflict              the name exists (create), or resource_version is stale (update)
    └── Rejected              the cluster refused the spec (the API's 422); carries its messages
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..runs import LiveRun, RunSummary, WorkerInfo

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


class ClusterError(Exception):
    """The cluster could not do what was asked."""


class Unreachable(ClusterError):
    """The cluster could not be reached; its silence says nothing about its runs."""


class NotFound(ClusterError):
    """No run of that name."""


class Conflict(ClusterError):
    """The name exists (create), or the resource_version is stale (update)."""


class Rejected(ClusterError):
    def __init__(self, message: str, errors: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.errors = errors or []


def summaries(cluster: Any) -> list[RunSummary]:
    """Every run as a ``RunSummary``: the cluster's ``list_run_summaries()`` when it has one,
    else derived from ``list_runs()`` (the digests computed here)."""
    fast = getattr(cluster, "list_run_summaries", None)
    if callable(fast):
        return fast()
    return [RunSummary.of(r) for r in cluster.list_runs()]


@runtime_checkable
class Cluster(Protocol):
    """What the reconciler needs of a cluster."""

    #: Where it is, for messages and for naming sources: ``http://127.0.0.1:8750``, ``slurm://debug``.
    address: str

    def list_runs(self) -> list[LiveRun]: ...

    def get_run(self, name: str) -> LiveRun | None: ...

    def create_run(self, document: dict[str, Any]) -> LiveRun: ...

    def update_run(self, name: str, document: dict[str, Any], resource_version: int) -> LiveRun: ...

    def delete_run(self, name: str) -> None: ...

    def workers(self, name: str) -> list[WorkerInfo]: ...

    def logs(self, worker: str) -> str: ...
