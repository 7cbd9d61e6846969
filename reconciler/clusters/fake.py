"""``FakeCluster``: the ``Cluster`` protocol in memory, faithful enough to test the reconciler on.

It behaves as the control plane's API does where the reconciler can tell:

* a create validates the document (``Rejected`` with the messages, as the API's 422), stores it
  as a server does (quantities as integers, defaults filled, and the cluster-dependent ones too:
  ``start`` and ``on_failure`` resolved, a ``metadata.uid``), and refuses a name that exists
  (``Conflict``); every run starts ``Pending``;
* ``resource_version`` comes from one counter that every change increments (create, update,
  delete, and the out-of-band changes below), so a deleted and re-created run never reuses a
  version; an update with a stale version is a ``Conflict``;
* it keeps sources' state in memory (``source_store()``), as the control plane keeps ``/sources``.

What a test controls: run states and workers (``start``, ``finish``, ``set_state``), logs
(``set_log``), changes made
out of band (``edit``, ``remove``: drift), failures (``fail_next`` raises ``Unreachable`` for the
next calls; ``crash_after`` raises ``SimulatedCrash`` after k successful calls of one kind, as
if the process applying were killed there), and ``calls``: every call made, in order.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..runspec import messages as msg
from ..state import MemorySourceStore, SourceStore
from .base import ClusterError, Conflict, LiveRun, NotFound, Rejected, Unreachable, WorkerInfo

__all__ = ["FakeCluster", "SimulatedCrash"]


class SimulatedCrash(Exception):
    """Raised by the fake where a test wants the caller to die mid-way."""


@dataclass
class _Stored:
    document: dict[str, Any]
    resource_version: int
    state: str = "Pending"
    reason: str = ""
    created_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    workers: list[WorkerInfo] = field(default_factory=list)


class FakeCluster:
    """An in-memory cluster for tests (see the module docstring)."""

    def __init__(self, address: str = "fake://test", *, now: Callable[[], float] = lambda: 0.0):
        self.address = address
        self.now = now
        self.calls: list[tuple[str, str]] = []
        self._runs: dict[str, _Stored] = {}
        self._version = 0
        self._sources = MemorySourceStore()
        self._fail_next = 0
        self._crash: dict[str, int] = {}
        self._logs: dict[str, str] = {}

    # ---- the protocol ------------------------------------------------------------------------

    def list_runs(self) -> list[LiveRun]:
        self._call("list", "")
        return [self._live(n) for n in sorted(self._runs)]

    def get_run(self, name: str) -> LiveRun | None:
        self._call("get", name)
        return self._live(name) if name in self._runs else None

    def create_run(self, document: dict[str, Any]) -> LiveRun:
        self._call("create", _name(document))
        stored = self._accept(document)
        name = stored["metadata"]["name"]
        if name in self._runs:
            raise Conflict(f"run {name} exists")
        self._runs[name] = _Stored(stored, self._next(), created_at=self.now())
        self._done("create")
        return self._live(name)

    def update_run(self, name: str, document: dict[str, Any], resource_version: int) -> LiveRun:
        self._call("update", name)
        if name not in self._runs:
            raise NotFound(f"no run named {name}")
        stored = self._accept(document)
        if stored["metadata"]["name"] != name:
            raise Rejected(f"the document names {stored['metadata']['name']}, not {name}")
        run = self._runs[name]
        if resource_version != run.resource_version:
            raise Conflict(
                f"run {name} changed: resource_version {resource_version} is stale "
                f"(now {run.resource_version})"
            )
        run.document = stored
        run.resource_version = self._next()
        self._done("update")
        return self._live(name)

    def delete_run(self, name: str) -> None:
        self._call("delete", name)
        if name not in self._runs:
            raise NotFound(f"no run named {name}")
        del self._runs[name]
        self._next()
        self._done("delete")

    def workers(self, name: str) -> list[WorkerInfo]:
        self._call("workers", name)
        if name not in self._runs:
            raise NotFound(f"no run named {name}")
        return list(self._runs[name].workers)

    def logs(self, worker: str) -> str:
        self._call("logs", worker)
        return self._logs.get(worker, "")

    def source_store(self) -> SourceStore:
        return self._sources

    # ---- what tests control ------------------------------------------------------------------

    def names(self) -> list[str]:
        """The runs there are, without recording a call."""
        return sorted(self._runs)

    def document(self, name: str) -> dict[str, Any]:
        """A run's stored document, without recording a call."""
        return copy.deepcopy(self._runs[name].document)

    def start(self, name: str, *, workers: int, gpus: int = 0, started_at: float = 0.0) -> None:
        """The run runs ``workers`` workers, ``gpus`` GPUs each, started at ``started_at``."""
        run = self._runs[name]
        run.state, run.reason, run.started_at = "Running", "", started_at
        run.workers = [
            WorkerInfo(f"{name}-{i}", i, "Running", "", machine=f"m{i}", gpus=gpus, started_at=started_at)
            for i in range(workers)
        ]
        self._next_for(run)

    def finish(self, name: str, state: str = "Completed", *, at: float = 0.0, reason: str = "") -> None:
        run = self._runs[name]
        run.state, run.reason, run.finished_at = state, reason, at
        code = 0 if state == "Completed" else 1
        run.workers = [
            replace(w, state=state, reason=msg.EXITED_REASON.format(code=code), exit_code=code)
            for w in run.workers
        ]
        self._next_for(run)

    def set_state(
        self, name: str, state: str, reason: str = "", *, workers: Sequence[WorkerInfo] = ()
    ) -> None:
        run = self._runs[name]
        run.state, run.reason = state, reason
        if workers:
            run.workers = list(workers)
        self._next_for(run)

    def set_log(self, worker: str, text: str) -> None:
        """What ``logs(worker)`` answers from now on."""
        self._logs[worker] = text

    def edit(self, name: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Change a run out of band (someone else's PUT): ``change`` edits the stored document."""
        run = self._runs[name]
        change(run.document)
        self._next_for(run)

    def remove(self, name: str) -> None:
        """Delete a run out of band."""
        del self._runs[name]
        self._next()

    def fail_next(self, calls: int = 1) -> None:
        """The next ``calls`` calls raise ``Unreachable`` (a transient failure)."""
        self._fail_next = calls

    def crash_after(self, kind: str, k: int) -> None:
        """After ``k`` more successful calls of ``kind`` (create, update, delete), the next raises
        ``SimulatedCrash`` before doing anything."""
        self._crash[kind] = k

    # ---- inside ------------------------------------------------------------------------------

    def _call(self, kind: str, name: str) -> None:
        if self._fail_next > 0:
            self._fail_next -= 1
            raise Unreachable(f"{self.address} did not answer")
        if self._crash.get(kind) == 0:
            del self._crash[kind]
            raise SimulatedCrash(f"killed before {kind} {name}")
        self.calls.append((kind, name))

    def _done(self, kind: str) -> None:
        if kind in self._crash:
            self._crash[kind] -= 1

    def _next(self) -> int:
        self._version += 1
        return self._version

    def _next_for(self, run: _Stored) -> None:
        run.resource_version = self._next()

    def _accept(self, document: dict[str, Any]) -> dict[str, Any]:
        """The document as the server would store it; ``Rejected`` when it is not a valid run."""
        from ..runspec.errors import InvalidSpec
        from ..runspec.models import resolve_on_failure, resolve_start
        from ..runspec.parse import parse_run

        doc = copy.deepcopy(document)
        if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict):
            doc["metadata"].pop("resource_version", None)
        try:
            run = parse_run(doc)
        except InvalidSpec as exc:
            raise Rejected(str(exc), [e.to_json() for e in exc.errors]) from exc
        except Exception as exc:  # pydantic's own, should the schema have let something through
            raise ClusterError(f"the fake could not read the run: {exc}") from exc
        stored = run.model_dump(mode="json", exclude_none=True)
        start = resolve_start(run.spec)
        stored["spec"].pop("policy", None)
        stored["spec"]["start"] = start
        stored["spec"]["on_failure"] = resolve_on_failure(run.spec, start)
        stored["metadata"]["uid"] = f"uid-{stored['metadata']['name']}-{self._version + 1}"
        return stored

    def _live(self, name: str) -> LiveRun:
        run = self._runs[name]
        busy = [w for w in run.workers if w.state == "Running"]
        counts: dict[str, int] = {}
        for w in run.workers:
            counts[w.state] = counts.get(w.state, 0) + 1
        document = copy.deepcopy(run.document)
        document["metadata"]["resource_version"] = run.resource_version
        return LiveRun(
            name=name,
            document=document,
            resource_version=run.resource_version,
            state=run.state,
            reason=run.reason,
            task_counts=dict(sorted(counts.items())),
            created_at=run.created_at,
            started_at=run.started_at,
            finished_at=run.finished_at,
            workers_running=len(busy),
            gpus_held=sum(w.gpus for w in busy),
        )


def _name(document: Any) -> str:
    meta = document.get("metadata") if isinstance(document, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else ""
