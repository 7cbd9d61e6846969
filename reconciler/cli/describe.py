"""``astra describe run NAME``: one run told whole, for a person.

In order: who it is (state, reason, the workers' readout, GPUs, age, labels), where it came
from (the source, file and revision that applied it, from astra's ``astra.*`` annotations; the
run it reruns, or the reruns made of it), its normalised spec, its events in time order (the
clusters that keep them: the control plane's ``GET /runs/{name}/events``), its workers grouped
by state, and the last lines of each failed worker's log.

Without typer: ``run_command`` takes ``flags.DescribeRunOptions`` and is run by the plain argv
route or by typer's command made of them (``day2_commands``).

Must not touch: the clusters' insides (the ``Cluster`` protocol, and ``events`` where a cluster
has it), the clock (``day2.clock``).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from .day2 import failing, open_cluster
from .output import echo

if TYPE_CHECKING:
    from .flags import DescribeRunOptions

__all__ = ["DESCRIBE_HELP", "describe_lines", "run_command"]

#: ``astra describe``'s help.
DESCRIBE_HELP = "Tell one run whole: status, source, spec, events, workers, failed workers' last lines."

#: How many of a failed worker's last log lines describe shows.
LOG_LINES = 10
#: How many failed workers' logs describe shows at most (an array can fail by thousands).
LOGS_OF = 5
#: How many of a run's events describe shows, the latest (a run of 10,000 workers has 20,000).
EVENTS_SHOWN = 50


def run_command(options: DescribeRunOptions) -> int:
    """Describe a run: status and reason, the source, file and revision that applied it, its
    normalised spec, its events in time order, its workers by state, and the last lines of the
    log of each failed worker.

    Example:

        astra describe run sweep
    """
    from . import day2

    with failing():
        cluster = open_cluster(options.server, options.token)
        for line in describe_lines(cluster, options.name, day2.clock(), all_events=options.all_events):
            echo(line)
    return 0


def _when(at: float | None) -> str:
    if at is None:
        return "-"
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def describe_lines(cluster: Any, name: str, now: float, *, all_events: bool = False) -> list[str]:
    """What ``astra describe run NAME`` prints (``all_events``: every event, not the latest
    ``EVENTS_SHOWN``)."""
    from .runviews import age, no_workers, run_annotations, run_labels, the_run

    run = the_run(cluster, name)
    notes = run_annotations(run)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(run.task_counts.items()))
    total = sum(run.task_counts.values())
    out = [
        f"Name:      {run.name}",
        f"State:     {run.state}",
        f"Reason:    {run.reason or '-'}",
        "Workers:   "
        + (f"Workers {run.workers_running} running of {total}" + (f" ({counts})" if counts else ""))
        if total
        else f"Workers:   {no_workers(run.state)}",
        f"GPUs:      {run.gpus_held} held",
        f"Created:   {_when(run.created_at)} ({age(run.created_at, now)} ago)",
    ]
    if run.finished_at is not None:
        out.append(f"Finished:  {_when(run.finished_at)}")
    found = run_labels(run)
    out.append("Labels:    " + (", ".join(f"{k}={v}" for k, v in sorted(found.items())) or "-"))
    out += _origin(cluster, run, notes)
    from .scheduleviews import schedule_lines

    out += schedule_lines(run, now)
    out += _chain(cluster, run)
    out += ["", "Spec (normalised):", *_spec(run.document)]
    out += ["", *_events(cluster, name, run.created_at, None if all_events else EVENTS_SHOWN)]
    if callable(getattr(cluster, "workers_page", None)):  # the pages shown, not 10,000 workers
        out += _paged_workers(cluster, name)
        return out
    workers = cluster.workers(name)
    out += ["", *_workers(workers)]
    by_rank = sorted(workers, key=lambda w: w.rank)
    out += _failed_logs(cluster, [w for w in by_rank if w.state == "Failed"])
    return out


def _chain(cluster: Any, run: Any) -> list[str]:
    """The runs it waits for (``depends_on``: when, and their state) and the runs waiting for it."""
    from ..runspec.dependencies import chain

    if callable(getattr(cluster, "related_runs", None)):  # the server finds those waiting for it
        needed = [d.get("run") for d in (run.document.get("spec") or {}).get("depends_on") or []]
        found = [cluster.get_run(n) for n in needed if isinstance(n, str) and n != run.name]
        found += cluster.related_runs(depends_on=run.name)
    else:
        found = cluster.list_runs()
    documents = {r.name: (r.document or {}, r.state) for r in found if r is not None}
    if run.document:
        documents[run.name] = (run.document, run.state)
    said = chain(run.name, documents)
    lines = []
    if said.needs:
        shown = [f"{o} (when {w}; {f'it is {s}' if s else 'not created yet'})" for o, w, s in said.needs]
        lines.append("Waits for: " + ", ".join(shown))
    if said.waited_by:
        lines.append("Waited by: " + ", ".join(f"{o} (when {w})" for o, w in said.waited_by))
    return lines


def _origin(cluster: Any, run: Any, notes: dict[str, str]) -> list[str]:
    """Where the run came from, and the reruns that came from it."""
    from ..runspec.rerun import RERUN_INDICES, RERUN_OF
    from ..runspec.schedules import MADE_BY
    from .runviews import run_labels

    by = run_labels(run).get(MADE_BY)
    if "astra.source" not in notes and RERUN_OF in notes:
        lines = [f"Source:    made by astra rerun from run {notes[RERUN_OF]}"]
    elif "astra.source" not in notes and by is not None:
        lines = [f"Source:    made by the schedule of run {by}, not by a source"]
    elif "astra.source" in notes:
        where = [f"file {notes['astra.file']}"] if "astra.file" in notes else []
        if "astra.revision" in notes:
            where.append(f"revision {notes['astra.revision']}")
        lines = [f"Source:    {notes['astra.source']}" + (f" ({', '.join(where)})" if where else "")]
    else:
        lines = ["Source:    - (not applied by astra: submitted by hand, or by another tool)"]
    if RERUN_OF in notes:
        lines.append(f"Rerun of:  {notes[RERUN_OF]} (its indices {notes.get(RERUN_INDICES, '-')})")
    from .runviews import run_annotations

    if callable(getattr(cluster, "related_runs", None)):  # the server finds them
        reruns = [r.name for r in cluster.related_runs(rerun_of=run.name)]
    else:
        reruns = sorted(r.name for r in cluster.list_runs() if run_annotations(r).get(RERUN_OF) == run.name)
    if reruns:
        lines.append(f"Reruns:    {', '.join(reruns)}")
    return lines


def _spec(document: dict[str, Any]) -> list[str]:
    import io

    from ruamel.yaml import YAML

    from ..runspec.normalize import normalize, without_own

    shown = without_own(normalize(document))
    yaml: Any = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False
    text = io.StringIO()
    yaml.dump(shown.get("spec", {}), text)
    return ["  " + line for line in text.getvalue().splitlines()]


def _events(cluster: Any, name: str, created: float | None, shown: int | None) -> list[str]:
    """The run's events in time order: the latest ``shown`` (``None``: all), and how to see the rest."""
    from .runviews import layout

    reader = getattr(cluster, "events", None)
    if not callable(reader):
        return [f"Events:    {cluster.address} keeps none; the workers below say where each one is."]
    tail = getattr(cluster, "events_tail", None)
    if callable(tail) and created is not None and shown is not None:  # the last ones (timed from the start)
        events, total = tail(name, shown)
        events = sorted(events, key=lambda e: e.get("at") or 0.0)
    else:
        events = sorted(reader(name), key=lambda e: e.get("at") or 0.0)
        total = len(events)
    if not events:
        return ["Events:    none yet."]
    base = created if created is not None else events[0].get("at") or 0.0
    earlier = 0 if shown is None else total - shown
    events = events if shown is None else events[-shown:]
    rows = [
        (
            f"+{max(0, int((e.get('at') or base) - base))}s",
            str(e.get("kind") or ""),
            str(e.get("worker") or "-"),
            str(e.get("state") or "-"),
            str(e.get("reason") or ""),
        )
        for e in events
    ]
    table = ["  " + line for line in layout(("AT", "KIND", "WORKER", "STATE", "REASON"), rows)]
    more = [f"  … {earlier} earlier events: astra describe run {name} --all-events"] if earlier > 0 else []
    return ["Events:", *table[:1], *more, *table[1:]]


#: How many workers of each state describe names.
NAMED = 20


def _workers(workers: list[Any]) -> list[str]:
    if not workers:
        return ["Workers:   none yet."]
    by_state: dict[str, list[str]] = {}
    for w in sorted(workers, key=lambda w: w.rank):
        by_state.setdefault(w.state, []).append(w.name)
    return _by_state({state: (names[:NAMED], len(names)) for state, names in by_state.items()})


def _by_state(named: dict[str, tuple[list[str], int]]) -> list[str]:
    """``Workers by state:``, each state's first workers by rank and how many it has."""
    lines = ["Workers by state:"]
    for state, (names, n) in sorted(named.items()):
        shown = ", ".join(names) + (f", … ({n - len(names)} more)" if n > len(names) else "")
        lines.append(f"  {state} ({n}): {shown}")
    return lines


def _paged_workers(cluster: Any, name: str) -> list[str]:
    """The workers' lines and the failed workers' logs from one page of each state's first
    workers (``workers_page``), as ``_workers`` and ``_failed_logs`` say them of every worker."""
    _, total, counts = cluster.workers_page(name, limit=1)
    if not total:
        return ["", "Workers:   none yet."]
    pages = {state: cluster.workers_page(name, state, NAMED)[0] for state, n in counts.items() if n}
    lines = [
        "",
        *_by_state({state: ([w.name for w in page], counts[state]) for state, page in pages.items()}),
    ]
    failed = pages.get("Failed", [])
    return lines + _failed_logs(cluster, failed, counts.get("Failed", 0))


def _failed_logs(cluster: Any, failed: list[Any], n: int | None = None) -> list[str]:
    """The last lines of the first failed workers' logs (``failed``: by rank; ``n``: how many
    failed in all, when ``failed`` holds only the first)."""
    from ..clusters.base import ClusterError

    n = len(failed) if n is None else n
    lines: list[str] = []
    for w in failed[:LOGS_OF]:
        try:
            text = _log_tail(cluster, w.name)
        except ClusterError as exc:  # said in its place: the rest of the description stands
            text = f"(its log cannot be read: {exc})"
        tail = text.splitlines()[-LOG_LINES:]
        lines += ["", f"Last lines of {w.name} ({w.reason or 'failed'}):"]
        lines += ["  " + line for line in tail] or ["  (no output)"]
    if n > LOGS_OF:
        lines += ["", f"… and {n - LOGS_OF} more failed workers: astra logs WORKER"]
    return lines


def _log_tail(cluster: Any, worker: str) -> str:
    """The worker's output, or its end where the cluster reads only that (``worker_logs(tail=)``)."""
    from .logs import read_log

    return read_log(cluster, worker, None, None, LOG_LINES)
