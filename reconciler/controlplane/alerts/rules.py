"""Alerts' rules and events, pure: which events an alert selects, and the words a message says.

An **event** (``Event``) is one thing that happened that people may want to be told of: a run
reached a final state, a source became Stalled or Ready at a new revision, an alert's delivery
gave up. Its ``key`` is what makes it one message: the same key is never queued twice for one
alert (one message per (run, final state) and per (source, revision, status)), and it is the
idempotency key the webhook sends. Its ``text`` is made once, when it is queued, so every retry
sends the same words.

An **alert** (``Alert``) selects events by kind, source, run label and severity (each empty
selector selects all) and names its sink (``reconciler.controlplane.alerts.sinks``).

=========================  ========  ============================================================
kind                       severity  when
=========================  ========  ============================================================
``run.failed``             error     a run reached Failed
``run.cancelled``          warning   a run reached Cancelled
``run.completed``          info      a run reached Completed
``run.worker_restarted``   warning   a worker of a run restarted N times (the alert's
                                     ``restarts``, 3 unless it says: told once, at the Nth)
``run.quota_wait``         warning   a run waited on its workspace's quota longer than the
                                     alert's ``waited`` (seconds, 30 min unless it says: told
                                     once per run per wait; ``waits``)
``run.replace_held``       warning   a pass held a replace of a running run until it ends
                                     (told once per source, run and revision)
``run.replaced``           info      a held replace was carried out (the same)
``source.stalled``         error     a source became Stalled (ValidationFailed, RenderFailed, …)
``source.load_failed``     error     a source's files could not be read (LoadFailed)
``source.fetch_failed``    warning   a source's remote could not be fetched (SourceFetchFailed)
``source.ready``           info      a source became Ready at a revision it was not Ready at
``source.pending``         info      a source's pass met a new revision (sent only to a
                                     commit-status sink, or an alert that names it)
``source.suspended``       warning   a source was suspended (``astra source suspend``)
``source.resumed``         info      a suspended source was resumed
``alert.gave_up``          error     an alert's delivery gave up (never sent of itself)
``plan.success``           info      ``astra plan --status-context CTX`` made a plan (sent only
                                     to a commit-status sink, or an alert that names it)
``plan.failure``           error     ``astra plan --status-context CTX`` failed (the same)
=========================  ========  ============================================================

Must not touch: I/O of any kind (no store, no network, no clock: ``now`` is given).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.runspec.quantities import format_duration

__all__ = [
    "COMMIT_STATUS_SINKS",
    "KINDS",
    "SEVERITIES",
    "STATUS_ONLY",
    "Alert",
    "Event",
    "gave_up_event",
    "matches",
    "plan_event",
    "quota_event",
    "replace_events",
    "restart_event",
    "run_event",
    "source_event",
    "suspend_event",
]

#: Each kind of event and its severity.
KINDS: dict[str, str] = {
    "run.failed": "error",
    "run.cancelled": "warning",
    "run.completed": "info",
    "run.worker_restarted": "warning",
    "run.quota_wait": "warning",
    "run.replace_held": "warning",
    "run.replaced": "info",
    "source.stalled": "error",
    "source.load_failed": "error",
    "source.fetch_failed": "warning",
    "source.ready": "info",
    "source.pending": "info",
    "source.suspended": "warning",
    "source.resumed": "info",
    "alert.gave_up": "error",
    "plan.success": "info",
    "plan.failure": "error",
}
#: The kinds a commit-status sink takes unasked, and any other alert only when it names them.
STATUS_ONLY = ("source.pending", "plan.success", "plan.failure")
SEVERITIES = ("info", "warning", "error")
#: The sinks that post a commit's status (they take ``source.pending`` unasked).
COMMIT_STATUS_SINKS = ("github", "gitlab")
_FINAL = {"Failed": "run.failed", "Cancelled": "run.cancelled", "Completed": "run.completed"}


@dataclass(frozen=True)
class Event:
    """One thing to tell (see the module docstring). ``revision``: the commit a source event is
    about (``main@sha1:…``), which a commit-status sink posts to; ``link``: its console page."""

    kind: str
    key: str
    workspace: str
    text: str
    at: float
    source: str | None = None
    run: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    revision: str | None = None
    link: str | None = None
    alert: str | None = None  # alert.gave_up: the alert that gave up
    cluster: str = "default"
    context: str | None = None  # a commit status's context, when not astra/<cluster>/<source>
    count: int | None = None  # run.worker_restarted: the worker's restarts so far
    waited: int | None = None  # run.quota_wait: the alert's ``waited`` it is told to

    @property
    def severity(self) -> str:
        return KINDS.get(self.kind, "info")

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "key": self.key,
            "severity": self.severity,
            "workspace": self.workspace,
            "text": self.text,
            "at": self.at,
            "source": self.source,
            "run": self.run,
            "labels": dict(sorted(self.labels.items())),
            "revision": self.revision,
            "link": self.link,
            "alert": self.alert,
            "cluster": self.cluster,
            **({"context": self.context} if self.context else {}),
            **({"count": self.count} if self.count is not None else {}),
            **({"waited": self.waited} if self.waited is not None else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Event:
        return cls(
            str(data["kind"]),
            str(data["key"]),
            str(data["workspace"]),
            str(data["text"]),
            float(data["at"]),
            source=data.get("source"),
            run=data.get("run"),
            labels=dict(data.get("labels") or {}),
            revision=data.get("revision"),
            link=data.get("link"),
            alert=data.get("alert"),
            cluster=str(data.get("cluster") or "default"),
            context=data.get("context"),
            count=data.get("count"),
            waited=data.get("waited"),
        )


@dataclass(frozen=True)
class Alert:
    """A rule: its name, workspace, selectors (empty: all) and sink (``{"kind": …, …}``)."""

    name: str
    workspace: str
    sink: Mapping[str, Any]
    events: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    severity: str = "info"  # the least severity selected
    restarts: int = 3  # run.worker_restarted: told when a worker has restarted this many times
    waited: int = 1800  # run.quota_wait: told when a run has waited on its quota this many seconds
    declared_by: str | None = None  # the source whose astra.yaml declares it (None: astra alert create)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "workspace": self.workspace,
            "sink": dict(self.sink),
            "events": list(self.events),
            "sources": list(self.sources),
            "labels": dict(self.labels),
            "severity": self.severity,
            "restarts": self.restarts,
            "waited": self.waited,
            **({"declared_by": self.declared_by} if self.declared_by is not None else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Alert:
        return cls(
            str(data["name"]),
            str(data["workspace"]),
            dict(data["sink"]),
            events=tuple(data.get("events") or ()),
            sources=tuple(data.get("sources") or ()),
            labels=dict(data.get("labels") or {}),
            severity=str(data.get("severity") or "info"),
            restarts=int(data.get("restarts") or 3),
            waited=int(data.get("waited") or 1800),
            declared_by=data.get("declared_by"),
        )


def matches(alert: Alert, event: Event) -> bool:
    """Whether ``alert`` selects ``event``: its workspace, and every selector it gives."""
    if event.workspace != alert.workspace:
        return False
    if event.kind == "alert.gave_up" and event.alert == alert.name:
        return False  # an alert's own failure is never sent through it (it would fail again)
    if event.kind in STATUS_ONLY and event.kind not in alert.events:
        return str(alert.sink.get("kind")) in COMMIT_STATUS_SINKS and _selected(alert, event)
    if alert.events and event.kind not in alert.events:
        return False
    if event.kind == "run.worker_restarted" and event.count != alert.restarts:
        return False  # told once: at the alert's Nth restart
    if event.kind == "run.quota_wait" and event.waited != alert.waited:
        return False  # told once: when the wait reached the alert's own limit
    return _selected(alert, event)


def _selected(alert: Alert, event: Event) -> bool:
    if alert.sources and event.source not in alert.sources:
        return False
    if any(event.labels.get(k) != v for k, v in alert.labels.items()):
        return False
    return SEVERITIES.index(event.severity) >= SEVERITIES.index(alert.severity)


def run_event(
    workspace: str, run: str, state: str, reason: str, labels: Mapping[str, str], at: float, link: str | None
) -> Event | None:
    """The event of a run that reached ``state`` (``None`` unless it is a final state)."""
    kind = _FINAL.get(state)
    if kind is None:
        return None
    text = f"run {run} {state}" + (f": {reason}" if reason else "")
    return Event(
        kind, f"run/{workspace}/{run}/{state}", workspace, text, at, run=run, labels=labels, link=link
    )


def restart_event(
    workspace: str, worker: tuple[str, str, int], reason: str, labels: Mapping[str, str], at: float
) -> Event:
    """The event of a worker (``(run, worker, restarts so far)``) that was restarted again."""
    run, name, count = worker
    text = f"run {run}: worker {name} restarted {count} time{'s' if count != 1 else ''}" + (
        f": {reason}" if reason else ""
    )
    key = f"restart/{workspace}/{name}/{count}"
    return Event("run.worker_restarted", key, workspace, text, at, run=run, labels=labels, count=count)


def source_event(
    scope: tuple[str, str, str],
    name: str,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    at: float,
    link: str | None,
) -> Event | None:
    """The event of a source whose status went from ``before`` to ``after``, if it is one to tell:
    a new state or reason (Stalled, LoadFailed, SourceFetchFailed), or Ready at a revision it was
    not Ready at. One message per (source, revision, status): the key holds all three."""
    state, reason, revision = after.get("state"), after.get("reason"), after.get("revision")
    if reason == "LoadFailed":
        kind = "source.load_failed"
    elif reason == "SourceFetchFailed":
        kind = "source.fetch_failed"
    elif state == "Stalled":
        kind = "source.stalled"
    elif state == "Ready" and revision and before.get("observed_revision") != revision:
        kind = "source.ready"
    elif state == "Reconciling" and revision and before.get("revision") != revision:
        kind = "source.pending"
    else:
        return None
    if kind not in ("source.ready", "source.pending") and (
        before.get("state"),
        before.get("reason"),
        before.get("revision"),
    ) == (
        state,
        reason,
        revision,
    ):
        return None  # said already
    message = str(after.get("message") or "")
    workspace, cluster = f"{scope[0]}/{scope[1]}", scope[2]
    first = message.split("; ")[0] if kind != "source.ready" else message
    if kind == "source.pending":
        first = "a pass is running"
    text = f"source {name} {state} {reason} at {revision or '-'}" + (f": {first}" if first else "")
    key = f"source/{workspace}/{name}/{revision}/{state}/{reason}"
    return Event(kind, key, workspace, text, at, source=name, revision=revision, link=link, cluster=cluster)


def suspend_event(scope: tuple[str, str, str], name: str, held: Mapping[str, Any] | None, at: float) -> Event:
    """The event of a source suspended (``held``: its suspension) or, with ``None``, resumed."""
    workspace = f"{scope[0]}/{scope[1]}"
    if held is None:
        text, kind = f"source {name} resumed: its next pass is a full one", "source.resumed"
    else:
        why = f": {held.get('reason')}" if held.get("reason") else ""
        text, kind = (
            f"source {name} suspended by {held.get('by')}{why}; no pass runs until resumed",
            "source.suspended",
        )
    key = f"{kind}/{workspace}/{name}/{at}"
    return Event(kind, key, workspace, text, at, source=name, cluster=scope[2])


def gave_up_event(alert: Alert, event: Event, why: str, at: float) -> Event:
    """The event of ``alert`` giving up on ``event`` (``why``: its last answer, secrets out)."""
    text = f"alert {alert.name} gave up on {event.kind} ({event.key}): {why}"
    return Event(
        "alert.gave_up", f"gave_up/{alert.name}/{event.key}", alert.workspace, text, at, alert=alert.name
    )


def plan_event(
    scope: tuple[str, str, str], source: str, revision: str, verdict: tuple[str, str, str], at: float
) -> Event:
    """The event of a plan made in CI (``astra plan --status-context CTX``): ``verdict`` is
    (``success`` or ``failure``, its one line, the status's context). Each plan is one message
    (its key holds ``at``): a CI job run again posts again, as Atlantis does."""
    state, line, context = verdict
    workspace = f"{scope[0]}/{scope[1]}"
    key = f"plan/{workspace}/{source}/{context}/{revision}/{at}"
    return Event(
        f"plan.{state}",
        key,
        workspace,
        f"plan of {source} at {revision}: {line}",
        at,
        source=source,
        revision=revision,
        cluster=scope[2],
        context=context,
    )


def quota_event(
    workspace: str, run: tuple[str, str, int], reason: str, labels: Mapping[str, str], at: float
) -> Event:
    """The event of a run (``(shown name, its wait's key, the alert's seconds)``) that has waited
    on its workspace's quota that long (``waits``): one per run, wait and limit."""
    name, wait, seconds = run
    text = f"run {name} has waited on its workspace's quota for {format_duration(seconds)}: {reason}"
    key = f"quota/{workspace}/{wait}/{seconds}"
    return Event("run.quota_wait", key, workspace, text, at, run=name, labels=labels, waited=seconds)


def replace_events(
    scope: tuple[str, str, str],
    source: str,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    at: float,
    link: str | None,
) -> list[Event]:
    """The held replaces of a source's status write: each run a Ready ``after`` holds (``held``:
    its plan's, at its revision; another state carries the last Ready's list, not yet planned
    at a new revision), and each run ``before`` held that ``after`` says was replaced
    (``replaced``, the pass's): one message per (source, run, revision) of each. ``labels`` are
    the caller's to fill in (the run's, from the store)."""
    workspace, cluster = f"{scope[0]}/{scope[1]}", scope[2]
    revision = after.get("revision") or "-"

    def made(kind: str, key: str, text: str, run: str) -> Event:
        return Event(
            kind,
            key,
            workspace,
            text,
            at,
            source=source,
            run=run,
            revision=revision,
            link=link,
            cluster=cluster,
        )

    events = []
    held = after.get("held") or () if after.get("state") == "Ready" else ()
    for h in held:
        run, why = str(h.get("run")), str(h.get("message") or "")
        text = f"source {source}: the replace of run {run} at {revision} is held: {why}"
        key = f"replace/{workspace}/{source}/{run}/{revision}/held"
        events.append(made("run.replace_held", key, text, run))
    was_held = {str(h.get("run")) for h in before.get("held") or ()}
    for run in sorted(set(map(str, after.get("replaced") or ())) & was_held):
        text = f"source {source}: the held replace of run {run} was carried out at {revision}"
        key = f"replace/{workspace}/{source}/{run}/{revision}/replaced"
        events.append(made("run.replaced", key, text, run))
    return events
