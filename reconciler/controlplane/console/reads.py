"""What the console's pages show, read from the engine as the REST API's ``wire`` models.

Owns the page-sized reads: ``runs_page`` (the Runs page: filtered, one page of ``wire.Run``),
``workers_tab`` (one page of a run's workers: ``wire.WorkerPage``), ``asked_gpus`` (what workers
ask, beside what they hold), ``run_events``, ``log_facts`` and ``log_chunk`` (a worker's Log: its
state, attempt and machine; its output from an offset), ``sources`` (``wire.SourceList``, the
latest active first; ``source``: one), ``gpu_map`` and ``queue`` (the Cluster page),
``chain_of`` (a run's ``depends_on``, both ways). Each is
built from ``api.views`` (the API's own makers of ``wire`` models) and the store's answers the
API sends, so a page says what the API says. Called under the engine's gate
(``pages.engine_call``). Changes nothing. Must not touch: HTTP, SQL, rules.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...runspec.dependencies import Chain, chain
from ...runspec.secrets import masking_note, secret_refs
from ...runspec.vocabulary import RunState, WorkerState
from ...wire import models as wire
from ..api.context import Scoped
from ..api.views import machine_views, run_view, worker_page, worker_view
from ..engine import Engine
from ..scheduler import HOLDING

__all__ = [
    "LOG_CHUNK",
    "PER_PAGE",
    "GpuMachine",
    "LogChunk",
    "LogFacts",
    "RunsPage",
    "asked_gpus",
    "gpu_map",
    "held_replace",
    "last_active",
    "log_chunk",
    "log_facts",
    "queue",
    "run_events",
    "runs_page",
    "source",
    "sources",
    "workers_tab",
]

#: Rows on one page of the Runs page and of a Workers tab.
PER_PAGE = 50
#: The most bytes of a log sent at once.
LOG_CHUNK = 256 * 1024
#: The most events a run's page shows (the newest).
EVENTS_SHOWN = 500


@dataclass
class RunsPage:
    """One page of the Runs page."""

    runs: list[wire.Run]
    total: int
    page: int
    pages: int
    counts: dict[str, int]


def _labelled(document: dict[str, Any], label: str) -> bool:
    """Whether the run's labels hold ``key=value`` (or ``key``, any value)."""
    labels = (document.get("metadata") or {}).get("labels") or {}
    key, eq, value = label.partition("=")
    if key.strip() not in labels:
        return False
    return not eq or str(labels[key.strip()]) == value.strip()


def runs_page(api: Scoped, runs_url: str, states: list[str], label: str, page: int) -> RunsPage:
    """The scope's runs in ``states`` (none: any) with ``label``, newest first, page ``page``
    (from 0): the filters read each run's record only; only the page's runs are made into views."""
    engine = api.engine
    s = engine.state
    wanted = {RunState(x) for x in states if x in RunState.__members__.values()}
    mine = api.runs()
    names = [
        n
        for n in mine
        if (not wanted or s.runs[n].state in wanted)
        and (not label or _labelled(engine.meta[n].document, label))
    ]
    names.reverse()
    pages = max(1, -(-len(names) // PER_PAGE))
    page = min(max(page, 0), pages - 1)
    chosen = names[page * PER_PAGE : (page + 1) * PER_PAGE]
    counts = Counter(str(s.runs[n].state) for n in mine)
    return RunsPage(
        runs=[run_view(engine, n, runs_url, api.scope.workspace) for n in chosen],
        total=len(names),
        page=page,
        pages=pages,
        counts=dict(counts),
    )


def workers_tab(engine: Engine, run: str, page: int) -> tuple[wire.WorkerPage, int, int]:
    """Page ``page`` of the run's workers by rank (held to the pages there are), the page shown
    and how many pages there are."""
    r = engine.state.runs[run]
    pages = max(1, -(-sum(engine.state.counts[run].values()) // PER_PAGE))
    page = min(max(page, 0), pages - 1)
    after = (r.seq, page * PER_PAGE - 1) if page > 0 else None
    found, _ = worker_page(engine, [run], {run}, None, PER_PAGE, after)
    return found, page, pages


def asked_gpus(api: Scoped, workers: Iterable[wire.Worker]) -> dict[str, int]:
    """The GPUs each of ``workers`` asks for, by its name: a worker's ``gpus`` are the GPUs it
    holds, none while it waits (Slurm's squeue shows a pending job's request the same way)."""
    s = api.engine.state
    out: dict[str, int] = {}
    for w in workers:
        record = s.workers.get(api.key(w.name))
        out[w.name] = record.ask.gpus if record is not None else w.gpus
    return out


@dataclass
class LogFacts:
    """What a worker's Log says above its output: the worker, which start it is on
    (``ASTRAEUS_ATTEMPT``, 0 on its first), why it last came again, and the masking note."""

    worker: wire.Worker
    attempt: int | None
    restart_reason: str | None
    masking: str | None
    live: bool


def log_facts(api: Scoped, run: str, worker: str) -> LogFacts | None:
    """The Log's facts of the worker named ``worker`` of the run named ``run`` (plain names);
    ``None``: no such worker in that run."""
    engine = api.engine
    w = engine.state.workers.get(api.key(worker))
    if w is None or w.run != api.key(run):
        return None
    r = engine.state.runs.get(w.run)
    names = sorted({n for _, n in secret_refs(r.run)}) if r is not None else []
    return LogFacts(
        worker=worker_view(engine, w),
        attempt=max(w.attempts - 1, 0) if w.attempts else None,
        restart_reason=w.restart_reason,
        masking=masking_note(names) if names else None,
        live=w.state in HOLDING or w.state is WorkerState.PENDING,
    )


def run_events(engine: Engine, run: str) -> tuple[list[wire.Event], int]:
    """The run's events in time order (the newest ``EVENTS_SHOWN``), and how many it has. Its own
    page: a run's events grow with its workers (an array of 10,000 has tens of thousands)."""
    rows = engine.store.event_rows(run)
    return [wire.Event.model_validate(e) for e in rows[-EVENTS_SHOWN:]], len(rows)


@dataclass
class LogChunk:
    """A piece of a worker's output: its text, the offset after it, whether the worker may write
    more, and which start of the worker wrote it (each start writes a file of its own: a Log
    following one start begins again at 0 when the next one starts)."""

    text: str
    offset: int
    live: bool
    attempt: int


def log_chunk(engine: Engine, worker: str, offset: int) -> LogChunk | None:
    """The worker's output from byte ``offset`` (at most ``LOG_CHUNK``) of its current start;
    ``None``: no such worker. The file is the one the executor named (as
    ``GET /workers/{worker}/logs`` reads)."""
    w = engine.state.workers.get(worker)
    if w is None:
        return None
    live = w.state in HOLDING or w.state is WorkerState.PENDING
    where = (engine.processes.get(w.name) or {}).get("log")
    if where is None:
        return LogChunk("", offset, live, w.attempts)
    try:
        with Path(where).open("rb") as f:
            f.seek(max(0, offset))
            data = f.read(LOG_CHUNK)
    except FileNotFoundError:
        return LogChunk("", offset, live, w.attempts)
    # cut at the last whole UTF-8 character: the next chunk starts with the rest
    cut = len(data)
    while cut > 0 and cut > len(data) - 4 and (data[cut - 1] & 0xC0) == 0x80:
        cut -= 1
    if cut > 0 and data[cut - 1] >= 0xC0:
        cut -= 1
    if cut == 0 and data:
        cut = len(data)
    return LogChunk(data[:cut].decode("utf-8", "replace"), max(0, offset) + cut, live, w.attempts)


def sources(engine: Engine, prefix: str) -> wire.SourceList:
    """The workspace's sources (their keys start with ``prefix``) as ``GET /sources`` answers
    them, the one active last first (``last_active``; by name when equal, never active last)."""
    found = wire.SourceList.model_validate_json(engine.store.list_sources_json(prefix))
    found.items.sort(key=lambda s: s.name)
    found.items.sort(key=lambda s: last_active(s) or 0.0, reverse=True)
    return found


def source(engine: Engine, key: str) -> wire.SourceState | None:
    """The source of key ``key`` as ``GET /sources/{name}`` answers it; ``None``: none."""
    found = engine.store.get_source_json(key)
    return wire.SourceState.model_validate_json(found[0]) if found is not None else None


def held_replace(api: Scoped, source_name: str, run: str) -> str | None:
    """The words of the replace of ``run`` its source ``source_name`` holds until the run ends
    (the source's status lists them: ``applied.held_status``); ``None``: none held."""
    found = source(api.engine, api.source_key(source_name))
    held = getattr(found.status, "held", None) if found is not None else None
    for h in held if isinstance(held, list) else []:
        if isinstance(h, dict) and h.get("run") == run:
            return str(h.get("message") or "")
    return None


def last_active(source: wire.SourceState) -> float | None:
    """When the source was last acted on: its newest apply, status written, run applied or lock
    taken (a watch's pass that changed nothing still writes its status)."""
    times = [h.when for h in source.history[-1:]]
    times += [source.status.updated_at, source.lock.created_at if source.lock else None]
    times += [e.applied_at for e in source.inventory.values()]
    known = [t for t in times if t is not None]
    return max(known) if known else None


@dataclass
class GpuMachine:
    """One machine of the GPU map: its GPUs, each held by a run (``None``: free), and which are
    unhealthy (the last ``gpus - healthy_gpus``)."""

    machine: wire.Machine
    slots: list[str | None] = field(default_factory=list)
    unhealthy: int = 0


def gpu_map(api: Scoped) -> dict[str, dict[str, list[GpuMachine]]]:
    """rack → NVLink domain → machines, each GPU coloured by the workspace's run holding it (a
    GPU another workspace holds is shown as held, by no run named)."""
    engine = api.engine
    mine = api.runs()
    holding, _ = worker_page(engine, mine, None, set(HOLDING), None, None)
    held: dict[str, list[str | None]] = defaultdict(list)
    for w in holding.items:
        if w.machine:
            held[w.machine].extend([w.run] * w.gpus)
    out: dict[str, dict[str, list[GpuMachine]]] = defaultdict(lambda: defaultdict(list))
    for m in machine_views(engine):
        slots: list[str | None] = list(held.get(m.name, []))[: m.gpus]
        slots += [None] * (m.gpus - len(slots))
        bad = m.gpus - m.healthy_gpus if m.healthy_gpus is not None else 0
        out[m.rack or "-"][m.nvlink_domain or "-"].append(GpuMachine(m, slots, bad))
    return {k: dict(v) for k, v in sorted(out.items())}


def queue(api: Scoped, limit: int = 200) -> tuple[list[wire.Worker], list[wire.Run], int]:
    """What of the workspace waits: pending workers (with their reasons), runs not admitted yet
    (not a run on a schedule: it waits for no room, its runs made do), and how many workers
    wait in all."""
    engine = api.engine
    mine = api.runs()
    waiting, _ = worker_page(engine, mine, None, {WorkerState.PENDING}, limit, None)
    s = engine.state
    unplaced = [
        n
        for n in mine
        if s.runs[n].state is RunState.PENDING
        and not s.run_workers.get(n)
        and s.runs[n].run.spec.schedule is None
    ]
    runs = [run_view(engine, n, "", "") for n in unplaced[:limit]]
    return waiting.items, runs, waiting.total


def chain_of(api: Scoped, name: str) -> Chain:
    """The runs ``name`` waits for (when, their state) and the runs that wait for it, in its
    workspace: ``runspec.dependencies.chain`` over the runs it can name, which are the run, the
    runs its ``depends_on`` names (found by their keys) and the runs whose ``depends_on`` names
    it (one look at each run's ``depends_on``; a run's state is read only for those)."""
    engine = api.engine
    kept: dict[str, str] = {}  # a run's name → its key, for the runs the chain shows
    for k in api.runs():
        meta = engine.meta.get(k)
        if meta is None:
            continue
        doc = meta.document
        own = doc["metadata"]["name"]
        named = (doc.get("spec") or {}).get("depends_on")
        if own == name or (named and any(dep == name for dep, _ in _depends_on(doc))):
            kept[own] = k
    found = engine.meta.get(kept[name]) if name in kept else None
    scoped = engine.by_scope.get(api.scope, {})
    for other, _ in _depends_on(found.document) if found is not None else ():
        key = api.key(other)  # a run's key is its scope's prefix and its name (scopes.run_key)
        if key in scoped and key in engine.meta:
            kept.setdefault(other, key)
    documents = {n: (engine.meta[k].document, str(engine.state.runs[k].state)) for n, k in kept.items()}
    return chain(name, documents)


def _depends_on(document: Any) -> list[tuple[str, Any]]:
    """The runs a document's ``spec.depends_on`` names (as ``runspec.dependencies`` reads them)."""
    found = (document.get("spec") or {}).get("depends_on") or []
    return [(d["run"], d) for d in found if isinstance(d, Mapping)]
