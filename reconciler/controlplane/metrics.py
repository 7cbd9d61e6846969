"""What ``/metrics`` says: the cluster's state in Prometheus' text format, computed when scraped.

Owns: ``Metrics``, one per app (``create_app`` makes it; nothing here is global: every metric
lives in registries of this object, never in ``prometheus_client``'s default registry), with

* the facts the server records as they happen (``record_request``: API requests by route
  template, method and status, with their duration; ``record_tick``: the scheduling step's
  duration; ``record_status`` / ``record_apply``: a source's reconcile passes and applies);
* ``ClusterCollector``, which reads the scheduler's state of every cluster at scrape time (runs
  and workers by state and workspace, GPUs by machine, the queue and its reasons by class) and
  the store (its size, each source's status and last apply);
* one ``CollectorRegistry`` per org (``registry(org)``): a token of org ``acme`` sees its
  workspaces only; the server-wide facts (ticks, requests, machines) are in each.

**Labels are bounded.** A label's value comes from a set an operator controls, never from a
run's or a worker's name: ``workspace``, ``cluster``, ``state`` (the vocabulary's), ``class``
(``REASON_CLASSES``), ``machine`` and ``rack`` (the inventory's), ``source`` (a reconcile source:
one per folder or repository), ``route`` (the route's template, ``/runs/{name}``, never the path
a client sent), ``method`` and ``status``. docs/metrics.md says the rule.

The alerts' deliveries: ``astra_alert_deliveries_total{sink, result}``, counted by the delivery
thread as each try ends (``record_delivery``; server-wide, as the requests are). ``Metrics.extra``
holds any other collector every org's registry should add.

Must not touch: the scheduler's records (read only, under the API's gate), SQL (the store's
``usage`` part answers), HTTP (``api.metrics`` serves it).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client import Counter as PromCounter
from prometheus_client import Histogram as PromHistogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from reconciler.runspec.vocabulary import RunState, WorkerState

from .metrics_fast import Row, RowGauge, row_labels

if TYPE_CHECKING:
    from .engine import Engine
    from .inventory import Inventory
    from .store import Store

__all__ = ["REASON_CLASSES", "ClusterCollector", "Metrics", "reason_class", "route_label"]

#: The classes a waiting run's or copy's reason falls in (the ``class`` label of the queue).
REASON_CLASSES = ("quota", "max_parallel", "room", "dependency", "schedule", "other")

#: A reason's class, by the words it starts with or holds (the scheduler's words, kept in
#: ``runspec.vocabulary`` and ``runspec.messages``); first match wins.
_CLASSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^Workspace \S+ (is at its quota|has used its)"), "quota"),
    (re.compile(r"^Array runs at most \d+ workers at once"), "max_parallel"),
    (re.compile(r"^(Waiting in the queue|Waiting for room)"), "room"),
    (re.compile(r"\b(depends on|Waiting for run|Waiting for group)\b", re.IGNORECASE), "dependency"),
    (re.compile(r"\bschedule\b", re.IGNORECASE), "schedule"),
)

#: Buckets of the scheduling step's duration (seconds): a quiet step takes microseconds, one
#: that admits a 10,000-copy array about a second.
TICK_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: Buckets of an API request's duration (seconds).
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

#: The base paths a route template is shown without (``/api/runs/{name}`` is ``/runs/{name}``).
_BASES = ("/api/v1/orgs/{org}/workspaces/{workspace}/clusters/{cluster}/api", "/api")


def reason_class(reason: str, _seen: dict[str, str] = {}) -> str:  # noqa: B006 - a memo of pure answers
    """The class of a waiting run's or worker's reason (one of ``REASON_CLASSES``)."""
    found = _seen.get(reason)
    if found is None:
        found = next((c for pattern, c in _CLASSES if pattern.search(reason)), "other")
        if len(_seen) < 10_000:
            _seen[reason] = found
    return found


def route_label(template: str | None) -> str:
    """A route's template without its base path (``/runs/{name}``); ``unmatched`` for none."""
    if not template:
        return "unmatched"
    for base in _BASES:
        if template == base:
            return "/"
        if template.startswith(base + "/"):
            return template[len(base) :]
    return template


class Metrics:
    """One app's metrics: what the server records as it goes, and a registry per org."""

    def __init__(
        self,
        clusters: Callable[[], Mapping[str, Engine]],
        store: Callable[[], Store],
        now: Callable[[], float],
    ) -> None:
        self.clusters, self.store, self.now = clusters, store, now
        self.requests = PromCounter(
            "astra_api_requests", "API requests answered", ["route", "method", "status"], registry=None
        )
        self.request_seconds = PromHistogram(
            "astra_api_request_duration_seconds",
            "How long an API request took to answer",
            ["route", "method"],
            buckets=REQUEST_BUCKETS,
            registry=None,
        )
        self.tick_seconds = PromHistogram(
            "astra_scheduler_tick_duration_seconds",
            "How long one scheduling step took (every tick of one instant, and its write)",
            [],
            buckets=TICK_BUCKETS,
            registry=None,
        )
        self.reconciles = PromCounter(
            "astra_source_reconciles",
            "Reconcile passes a source's loop reported, by the state it ended in",
            ["workspace", "source", "state"],
            registry=None,
        )
        self.applies = PromCounter(
            "astra_applies",
            "Applies recorded in a source's history",
            ["workspace", "source", "result"],
            registry=None,
        )
        self.deliveries = PromCounter(
            "astra_alert_deliveries",
            "Tries of the alerts' messages, by the sink's kind and how each ended (sent, retried, gave_up)",
            ["sink", "result"],
            registry=None,
        )
        #: collectors every org's registry holds besides these
        self.extra: list[Collector] = []
        self._registries: dict[str, CollectorRegistry] = {}
        self._machine_rows: dict[str, tuple[Inventory, list[Row]]] = {}

    def record_request(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(route, method, str(status)).inc()
        self.request_seconds.labels(route, method).observe(seconds)

    def record_delivery(self, sink: str, result: str) -> None:
        self.deliveries.labels(sink, result).inc()

    def record_tick(self, seconds: float) -> None:
        self.tick_seconds.observe(seconds)

    def record_status(self, workspace: str, source: str, state: str | None) -> None:
        self.reconciles.labels(workspace, source, state or "Unknown").inc()

    def record_apply(self, workspace: str, source: str, result: str | None) -> None:
        said = (result or "").split(":", 1)[0].strip() or "unknown"
        self.applies.labels(workspace, source, said if said in ("applied", "failed") else "other").inc()

    def registry(self, org: str) -> CollectorRegistry:
        """Org ``org``'s registry (made at its first scrape): its workspaces, and the server's facts."""
        found = self._registries.get(org)
        if found is None:
            found = CollectorRegistry(auto_describe=False)
            made: list[Collector] = [self.requests, self.request_seconds, self.tick_seconds]
            made += [self.reconciles, self.applies, self.deliveries, ClusterCollector(self, org), *self.extra]
            for c in made:
                found.register(c)
            self._registries[org] = found
        return found

    def machine_rows(self, cluster: str, inventory: Inventory) -> list[Row]:
        """Each machine's labels (``cluster``, ``machine``, ``rack``, ``gpu_model``) as a
        ``RowGauge`` row, in the inventory's order: made once per inventory of a cluster (a
        state's inventory is never changed in place; a new one is a new object)."""
        kept = self._machine_rows.get(cluster)
        if kept is None or kept[0] is not inventory:
            made = [
                row_labels({"cluster": cluster, "machine": m.name, "rack": m.rack or "", "gpu_model": model})
                for m in inventory
                for model in (m.gpu_model,)
            ]
            kept = self._machine_rows[cluster] = (inventory, made)
        return kept[1]

    def exposition(self, org: str) -> bytes:
        """The text format of org ``org``'s metrics, computed now (``metrics_fast``: the gauges
        written without a call per sample; the same bytes as ``generate_latest``)."""
        from .metrics_fast import exposition

        return exposition(self.registry(org))

    def plain_exposition(self, org: str) -> bytes:
        """``exposition`` by ``prometheus_client.generate_latest`` alone: the fast path's twin."""
        return generate_latest(self.registry(org))


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


class ClusterCollector(Collector):
    """The scheduler's state of every cluster, and the store's facts, as one org sees them."""

    def __init__(self, metrics: Metrics, org: str) -> None:
        self.metrics, self.org = metrics, org
        self.prefix = org + "/"

    def collect(self) -> Iterable[Metric]:
        now = self.metrics.now()
        runs = _gauge("astra_runs", "Runs by state", ["workspace", "cluster", "state"])
        workers = _gauge("astra_workers", "Workers by state", ["workspace", "cluster", "state"])
        gpus = _gauge(
            "astra_workspace_gpus_allocated", "GPUs a workspace's workers hold", ["workspace", "cluster"]
        )
        waiting_runs = _gauge(
            "astra_queue_waiting_runs",
            "Runs waiting to start, by their reason's class",
            ["workspace", "cluster", "class"],
        )
        waiting_workers = _gauge(
            "astra_queue_waiting_workers",
            "Workers (an array's copies too) waiting for a place, by their reason's class",
            ["workspace", "cluster", "class"],
        )
        oldest = _gauge(
            "astra_queue_oldest_wait_seconds",
            "How long the workspace's oldest waiting run has waited",
            ["workspace", "cluster"],
        )
        for cluster, engine in sorted(self.metrics.clusters().items()):
            self._cluster(cluster, engine, now, (runs, workers, gpus, waiting_runs, waiting_workers, oldest))
        yield from (runs, workers, gpus, waiting_runs, waiting_workers, oldest)
        yield from self._machines()
        yield from self._store(now)

    def _cluster(self, cluster: str, engine: Engine, now: float, into: tuple[GaugeMetricFamily, ...]) -> None:
        """One cluster's runs, workers and queue, by workspace (this org's only). The work is one
        pass over the runs, and over the waiting workers of the runs that have any."""
        runs, workers, gpus, waiting_runs, waiting_workers, oldest = into
        s, prefix = engine.state, self.prefix
        run_counts: Counter[tuple[str, str]] = Counter()
        worker_counts: Counter[tuple[str, str]] = Counter()
        waits: Counter[tuple[str, str]] = Counter()
        copy_waits: Counter[tuple[str, str]] = Counter()
        first: dict[str, float] = {}
        pending, cls = WorkerState.PENDING, reason_class
        for key, r in s.runs.items():
            ws = s.ws_of[key]
            if not ws.startswith(prefix):
                continue
            ws = ws[len(prefix) :]
            run_counts[ws, r.state] += 1
            for state, n in s.counts[key].items():
                if n:
                    worker_counts[ws, state] += n
            if r.state is RunState.PENDING:
                waits[ws, cls(r.reason)] += 1
                if r.submitted_at < first.get(ws, now):
                    first[ws] = r.submitted_at
            waiting = s.pending.get(key)
            if waiting:
                every = s.workers
                for w in waiting:
                    if every[w].state is pending:
                        copy_waits[ws, cls(every[w].reason)] += 1
        seen = {k[0] for k in run_counts}
        for (ws, run_state), n in sorted(run_counts.items()):
            runs.add_metric([ws, cluster, str(run_state)], n)
        for (ws, worker_state), n in sorted(worker_counts.items()):
            workers.add_metric([ws, cluster, str(worker_state)], n)
        for ws in sorted(seen):
            gpus.add_metric([ws, cluster], s.ws_gpus[prefix + ws])
            oldest.add_metric([ws, cluster], max(0.0, now - first[ws]) if ws in first else 0.0)
        for (ws, c), n in sorted(waits.items()):
            waiting_runs.add_metric([ws, cluster, c], n)
        for (ws, c), n in sorted(copy_waits.items()):
            waiting_workers.add_metric([ws, cluster, c], n)

    def _machines(self) -> Iterator[Metric]:
        """Every cluster's machines: GPUs allocated, free and unhealthy; whether each takes work.
        Five lines a machine (62,500 at 100,000 GPUs): ``RowGauge``s, whose rows' label text is
        made once per inventory (``Metrics.machine_rows``), so a scrape formats one number a line."""
        rows: list[Row] = []
        allocated: list[int] = []
        free: list[int] = []
        unhealthy: list[int] = []
        total: list[int] = []
        up: list[int] = []
        for cluster, engine in sorted(self.metrics.clusters().items()):
            s = engine.state
            rows += self.metrics.machine_rows(cluster, s.inventory)
            room, unusable = s.free, s.unusable
            for m in s.inventory:
                f, out = room[m.name], m.name in unusable
                allocated.append(m.gpus - f.gpus)
                free.append(0 if out else f.healthy_gpus)
                unhealthy.append(m.gpus - m.healthy)
                total.append(m.gpus)
                up.append(0 if out else 1)
        yield RowGauge("astra_machine_gpus_allocated", "GPUs of the machine workers hold", rows, allocated)
        yield RowGauge("astra_machine_gpus_free", "Healthy GPUs of the machine nothing holds", rows, free)
        failing = "GPUs of the machine failing their checks"
        yield RowGauge("astra_machine_gpus_unhealthy", failing, rows, unhealthy)
        yield RowGauge("astra_machine_gpus", "GPUs of the machine", rows, total)
        yield RowGauge("astra_machine_up", "1 when the machine takes work (reporting, not lost)", rows, up)

    def _store(self, now: float) -> Iterator[Metric]:
        """The store's size, and each source of this org: its status and its last apply."""
        store = self.metrics.store()
        size = _gauge("astra_store_bytes", "The size of the control plane's database", [])
        size.add_metric([], store.size_bytes())
        yield size
        status = _gauge(
            "astra_source_status",
            "1 for the state a source's last reconcile pass ended in",
            ["workspace", "source", "state"],
        )
        updated = _gauge(
            "astra_source_status_updated_timestamp_seconds",
            "When a source's loop last reported a pass (the control plane's clock)",
            ["workspace", "source"],
        )
        applied = _gauge(
            "astra_source_last_apply_timestamp_seconds",
            "When a source last applied (the revision it runs is this old)",
            ["workspace", "source"],
        )
        for s in store.source_summaries(self.org):
            ws, name = s["workspace"], s["source"]
            if s["state"] is not None:
                status.add_metric([ws, name, s["state"]], 1)
            if s["updated_at"] is not None:
                updated.add_metric([ws, name], s["updated_at"])
            if s["applied_at"] is not None:
                applied.add_metric([ws, name], s["applied_at"])
        yield from (status, updated, applied)
