"""``astra plan --status-context CTX``: the plan's verdict posted on its commit as a status.

The verdict goes to the server (``POST /alerts:status``), which queues it for the workspace's
commit-status alerts (github, gitlab) that select the source; their tokens stay in the server's
secret store, and the delivery (retries, history) is the watch's. ``success`` says the plan's
summary (``plan: 1 to create, 0 to update, 0 to replace, 0 to delete``), ``failure`` its first
error. A status that cannot be posted (no commit, no alert, no server) is said on stderr and
leaves the plan's exit code as it is: the plan is the job's result, the status a report of it.

Must not touch: the plan itself (``planning``), how a status is sent (``controlplane.alerts``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .output import echo, error

__all__ = ["Verdict", "finished", "post", "summary", "verdict"]


@dataclass
class Verdict:
    """What the plan made known as it ran: its source's name and its commit (``REF@sha1:SHA``);
    ``named``: the source's name before the plan knew it (the options' ``--source``, or the one
    the files or ``--git`` give: the caller's ``planning.source_name``)."""

    named: str
    source: str | None = None
    revision: str | None = None

    def planned(self, made: Any, setup: Any) -> None:
        self.source = setup.source.name
        revision = made.revision or {}
        if revision.get("commit"):
            self.revision = str(revision["id"])


def summary(made: Any) -> str:
    """``plan: N to create, N to update, N to replace, N to delete`` (``no changes``)."""
    counts: dict[str, int] = {}
    for c in made.changes:
        counts[str(c.action)] = counts.get(str(c.action), 0) + 1
    words = [f"{counts.get(a, 0)} to {a}" for a in ("create", "update", "replace", "delete")]
    return "plan: " + (", ".join(words) if made.has_changes else "no changes")


def first_error(exc: BaseException) -> str:
    """The first line of what went wrong (a file's first problem, else the error's own words)."""
    errors = getattr(exc, "errors", None)
    text = errors[0].format() if errors else str(exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


@contextmanager
def verdict(options: Any, specs: list[str], named: str) -> Iterator[Verdict]:
    """Around a plan: its verdict known, post it (``failure`` with the first error when the
    plan raises; the error goes on as it was); ``named``: as ``Verdict.named``."""
    seen = Verdict(named)
    if not options.status_context:
        yield seen
        return
    try:
        yield seen
    except Exception as exc:
        post(options, specs, seen, ("failure", "plan failed: " + first_error(exc)))
        raise


def finished(options: Any, specs: list[str], seen: Verdict, made: Any, refusal: str | None) -> None:
    """Post a made plan's verdict (``refusal``: why the plan still fails, its first line)."""
    if options.status_context:
        state = ("failure", f"plan failed: {refusal}") if refusal else ("success", summary(made))
        post(options, specs, seen, state)


def post(options: Any, specs: list[str], seen: Verdict, state: tuple[str, str]) -> None:
    """Send the verdict to the server; a warning on stderr when it cannot be."""
    from .remote import CommandError, call

    source = seen.source or seen.named
    revision = seen.revision or _commit_of(specs)
    if revision is None:
        error("--status-context: the files are in no git commit: no status posted")
        return
    body = {
        "source": source,
        "revision": revision,
        "state": state[0],
        "description": state[1],
        "context": options.status_context,
    }
    try:
        got = call("POST", "/alerts:status", server=options.server, token=options.token, json=body)
    except CommandError as exc:
        error(f"--status-context: the status was not posted: {exc}")
        return
    alerts = got.json().get("alerts") or []
    if not alerts:
        error(
            f"--status-context: no github or gitlab alert selects source {source}: no status posted "
            "('astra alert create NAME --sink github …')"
        )
        return
    echo(
        f"{options.status_context}: {state[0]} queued for {revision} (alerts: {', '.join(alerts)})", err=True
    )


def _commit_of(specs: list[str]) -> str | None:
    from ..git import worktree_revision

    revision = worktree_revision(specs) if specs else None
    return revision.id if revision is not None else None
