"""How the day-2 commands show runs: rows of ``astra get runs``, ages, selectors, tables.

Owns: turning a run's brief (``GET /runs?view=brief``'s item, or ``brief`` of a ``LiveRun``) into
the row a person reads (``NAME STATE REASON WORKERS GPUS AGE SOURCE``; ``-o wide`` adds ``FILE
REVISION``) and into the record ``-o json|yaml`` prints, the
short age (``45s``, ``3m``, ``2h``, ``4d``), what a run with no worker went through (``no workers:
failed before placement``), label selectors (``-l team=nlp``), the columns'
layout, and finding a run that a command names (one line when there is none).

Must not touch: clusters beyond the ``Cluster`` protocol's reads, the clock (``now`` comes in),
typer (the commands are in ``get``, ``describe``, ``logs``, ``delete``, ``rerun``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the commands' start-up imports nothing of the layers (README "Speed")
    from ..runs import LiveRun

__all__ = [
    "CommandFailed",
    "age",
    "brief",
    "layout",
    "matches",
    "no_workers",
    "parse_selector",
    "run_annotations",
    "run_labels",
    "run_record",
    "run_row",
    "short_revision",
    "the_run",
    "workers_short",
]

#: The table's reason column is cut here (``-o wide`` and ``describe`` show it whole).
REASON_WIDTH = 60


class CommandFailed(Exception):
    """A day-2 command cannot go on: the message is the one line the user sees (exit 1)."""


def age(since: float | None, now: float) -> str:
    """``45s``, ``3m``, ``2h``, ``4d`` (kubectl's short age); ``-`` when not known."""
    if since is None:
        return "-"
    seconds = max(0, int(now - since))
    if seconds >= 86400:  # an if a unit: one age a row of 10,000
        return f"{seconds // 86400}d"
    if seconds >= 3600:
        return f"{seconds // 3600}h"
    if seconds >= 60:
        return f"{seconds // 60}m"
    return f"{seconds}s"


def run_annotations(run: LiveRun) -> dict[str, str]:
    meta = run.document.get("metadata") or {}
    found = meta.get("annotations") or {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def run_labels(run: LiveRun) -> dict[str, str]:
    meta = run.document.get("metadata") or {}
    found = meta.get("labels") or {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def workers_short(run: LiveRun) -> str:
    """The readout ``Workers 8 running of 100`` in its short form: ``8/100``."""
    return f"{run.workers_running}/{sum(run.task_counts.values())}"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def short_revision(revision: str) -> str:
    """``main@sha1:dbe6b3abe26b9b93…`` as ``main@dbe6b3abe26b``; anything else as it is."""
    ref, at, rest = revision.rpartition("@")
    algo, colon, digest = rest.partition(":")
    if at and colon and algo.startswith("sha"):
        return f"{ref}@{digest[:12]}"
    return revision


def brief(run: LiveRun) -> dict[str, Any]:
    """The run as ``GET /runs?view=brief`` lists it (``wire.briefs.RunBrief``): what ``astra get
    runs`` shows, in every output, of a run read whole (named, or from a cluster without briefs)."""
    return {
        "name": run.name,
        "labels": run_labels(run),
        "annotations": run_annotations(run),
        "state": run.state,
        "reason": run.reason,
        "created_at": run.created_at,
        "workers_running": run.workers_running,
        "gpus_held": run.gpus_held,
        "task_counts": run.task_counts,
        "schedule": run.schedule,
    }


def _notes(b: dict[str, Any]) -> dict[str, Any]:
    found = b.get("annotations")
    return found if isinstance(found, dict) else {}


def run_row(b: dict[str, Any], now: float, *, wide: bool = False) -> tuple[str, ...]:
    """A run's row of ``astra get runs`` (``b``: its ``brief``)."""
    notes = _notes(b)
    reason = b.get("reason") or ""
    counts = b.get("task_counts") or {}
    row: tuple[str, ...] = (
        b["name"],
        str(b.get("state", "Pending")),
        (reason if wide or len(reason) <= REASON_WIDTH else _cut(reason, REASON_WIDTH)) or "-",
        f"{b.get('workers_running') or 0}/{sum(counts.values()) if counts else 0}",
        str(b.get("gpus_held") or 0),
        age(b.get("created_at"), now),
        str(notes.get("astra.source", "-")) if notes else "-",
    )
    if wide:
        row += (str(notes.get("astra.file", "-")), short_revision(str(notes.get("astra.revision", "-"))))
    return row


RUN_COLUMNS = ("NAME", "STATE", "REASON", "WORKERS", "GPUS", "AGE", "SOURCE")
WIDE_COLUMNS = (*RUN_COLUMNS, "FILE", "REVISION")


def run_record(b: dict[str, Any]) -> dict[str, Any]:
    """A run as ``-o json|yaml`` lists it (``b``: its ``brief``): what the table shows, whole,
    with times in seconds."""
    notes = _notes(b)
    counts = b.get("task_counts") or {}
    labels = b.get("labels")
    return {
        "name": b["name"],
        "state": b.get("state", "Pending"),
        "reason": b.get("reason") or "",
        "workers_running": b.get("workers_running") or 0,
        "workers": sum(counts.values()),
        "task_counts": dict(sorted(counts.items())),
        "gpus": b.get("gpus_held") or 0,
        "created_at": b.get("created_at"),
        "labels": {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {},
        "source": notes.get("astra.source"),
        "file": notes.get("astra.file"),
        "revision": notes.get("astra.revision"),
        **({"schedule": b["schedule"]} if b.get("schedule") else {}),
    }


def layout(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """Left-aligned columns, three spaces apart, the last one unpadded."""
    table = [tuple(header), *(tuple(r) for r in rows)]
    widths = [max(map(len, column)) for column in zip(*table, strict=True)]
    line = "   ".join(f"{{:<{w}}}" for w in widths).format
    return [line(*r).rstrip() for r in table]


def parse_selector(given: Sequence[str]) -> dict[str, str]:
    """``-l team=nlp -l tier=prod`` or ``-l team=nlp,tier=prod``: every label must match."""
    wanted: dict[str, str] = {}
    for item in given:
        for part in filter(None, (p.strip() for p in item.split(","))):
            key, eq, value = part.partition("=")
            if not eq or not key:
                raise CommandFailed(f"a label selector is key=value, not '{part}'")
            wanted[key] = value
    return wanted


def matches(b: dict[str, Any], selector: dict[str, str], states: Sequence[str]) -> bool:
    """Whether the run (``b``: its ``brief``) has every label of ``selector`` and one of ``states``."""
    have = b.get("labels") or {}
    if any(k not in have or str(have[k]) != v for k, v in selector.items()):
        return False
    return not states or str(b.get("state")).lower() in {s.lower() for s in states}


def the_run(cluster: Any, name: str) -> LiveRun:
    """The run ``name`` on ``cluster``; ``CommandFailed`` naming the cluster when there is none."""
    found = cluster.get_run(name)
    if found is None:
        raise CommandFailed(f"no run {name} on {cluster.address}")
    return found


def no_workers(state: str) -> str:
    """What a run with no worker is going through, in place of ``Workers 0 running of 0``."""
    if state == "Failed":
        return "no workers: failed before placement"
    if state == "Cancelled":
        return "no workers: cancelled before placement"
    if state == "Completed":
        return "no workers"
    return "none yet: not placed"
