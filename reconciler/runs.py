"""Runs as the layers hand them to each other: plain data, shared, owned by no layer.

* ``DesiredItem``: one run the files ask for (the load makes them; the plan reads them);
* ``LiveRun``, ``RunSummary``, ``WorkerInfo``: a run and its workers as a cluster reports them
  (every cluster makes them; observe, the plan's cost and apply's ``--wait`` read them);
* ``PlanError``: a plan cannot be made (the plan raises it, and so does the load when a file
  changes while its runs are being planned);
* ``Capacity``: what a cluster's machines can hold at most (its largest machine's GPUs, all of
  theirs), for a plan to refuse an ask no machine could ever meet.

(Run names unique across what is loaded together: ``reconciler.runspec.unique``.)

``reconciler.clusters.base`` and ``reconciler.plan`` re-export them, so that callers keep their
names; the point of this module is that neither of those layers has to import the other (nor
the load the plan) to speak about a run.

Must not touch: files, clusters, clocks. It imports nothing of ours but the spec layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .runspec.vocabulary import FINAL_RUN_STATES

__all__ = ["Capacity", "DesiredItem", "LiveRun", "PlanError", "RunSummary", "WorkerInfo"]


class PlanError(Exception):
    """The plan cannot be made (or a saved one cannot be read): one line for the user."""


class DesiredItem:
    """One run the files ask for: its final document and the file it came from.

    ``normalized`` (``normalize(document)``) and ``digest`` (its digest) when known already. An
    item from the load cache carries its digest only (``document`` is ``None``): a plan that
    finds the run unchanged by its three digests needs nothing more, and the runs it needs in
    full get their documents before it is made (``reconciler.load.documents``). The plan itself
    reads no file: an item without its document that it must compare is a ``PlanError``.
    """

    __slots__ = ("_normalized", "digest", "document", "file", "name")

    def __init__(
        self,
        name: str,
        document: dict[str, Any] | None = None,
        file: str | None = None,
        normalized: dict[str, Any] | None = None,
        digest: str | None = None,
    ):
        if document is None and digest is None:
            raise TypeError("a DesiredItem needs its document or its digest")
        self.name, self.file, self.digest = name, file, digest
        self.document, self._normalized = document, normalized

    @property
    def normalized(self) -> dict[str, Any] | None:
        return self._normalized

    def after(self) -> dict[str, Any]:
        """The normalised document: the one kept, else computed now (``PlanError`` for an item
        that came without its document)."""
        if self._normalized is not None:
            return self._normalized
        if self.document is None:
            raise PlanError(f"run {self.name} came from the load cache without its document: plan again")
        from .runspec.normalize import normalize  # reads the published schema: only when needed

        return normalize(self.document)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DesiredItem):
            return NotImplemented
        return (self.name, self.file, self.document, self.digest) == (
            other.name,
            other.file,
            other.document,
            other.digest,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"DesiredItem(name={self.name!r}, file={self.file!r})"


@dataclass(frozen=True)
class WorkerInfo:
    """One worker as the cluster reports it."""

    name: str
    rank: int
    state: str
    reason: str
    machine: str | None = None
    exit_code: int | None = None
    restarts: int = 0
    gpus: int = 0
    started_at: float | None = None  # seconds since the epoch, of the current attempt
    group: str | None = None


@dataclass(frozen=True)
class Capacity:
    """What a cluster's machines hold: the GPUs of the largest one, and of all of them together."""

    largest_gpus: int
    total_gpus: int
    machines: int


@dataclass(frozen=True)
class LiveRun:
    """One run as the cluster reports it: the document it was given, and its status."""

    name: str
    document: dict[str, Any]  # {"metadata": {...}, "spec": {...}} as submitted (server fields removed)
    resource_version: int
    state: str
    reason: str = ""
    task_counts: dict[str, int] = field(default_factory=dict)
    created_at: float | None = None
    started_at: float | None = None  # when its first worker started running, if it has
    finished_at: float | None = None
    workers_running: int = 0
    gpus_held: int = 0
    #: a run on a schedule: its schedule as the cluster says it (``wire.ScheduleStatus``)
    schedule: dict[str, Any] | None = None

    @property
    def final(self) -> bool:
        return self.state in FINAL_RUN_STATES


@dataclass(slots=True)
class RunSummary:
    """What a plan reads of a run whose digests agree: no document, and ``spec_digest``, the
    digest of its normalised document (``reconciler.runspec.normalize.spec_digest``; ``None``: not
    known). It stands for the run's ``LiveRun`` where the plan needs no document (it has the
    same ``name``, ``resource_version``, ``state`` and ``final``)."""

    name: str
    resource_version: int
    state: str
    spec_digest: str | None

    @property
    def final(self) -> bool:
        return self.state in FINAL_RUN_STATES

    @classmethod
    def of(cls, run: LiveRun) -> RunSummary:
        from .runspec.normalize import spec_digest

        return cls(run.name, run.resource_version, run.state, spec_digest(run.document))
