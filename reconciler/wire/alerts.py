"""The alerts' shapes on the wire (``/alerts``): a workspace's rules and what they sent.

Owns: ``AlertWrite`` (the body of ``PUT /alerts/{name}``), ``AlertRule`` and ``AlertList``
(answers), ``AlertMessage`` and ``AlertHistory`` (``GET /alerts:history``). A sink's secrets are
named, never given: ``url``, ``key`` and ``token`` are secret names (``astra secret set``).

::

    alerts     GET /alerts → AlertList;  PUT /alerts/{name} AlertWrite → AlertRule (201 new, 200)
               DELETE /alerts/{name} → 204;  POST /alerts/{name}/test → AlertMessage (202)
               GET /alerts:history[?alert=NAME] → AlertHistory (newest first)
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, WithJsonSchema

from ..runspec.alertdecl import ALERT_KINDS
from ..runspec.quantities import POSITIVE_DURATION_PATTERN, parse_duration
from .models import EPOCH, Answer, RequestBody, _integral

__all__ = [
    "SECRET_FIELDS",
    "SECRET_NAME",
    "SECRET_NAME_WORDS",
    "AlertHistory",
    "AlertList",
    "AlertMessage",
    "AlertRule",
    "AlertWrite",
    "EventKind",
    "PlanStatus",
    "PlanStatusQueued",
    "Sink",
]

#: The kinds of event an alert may select: astra.yaml's (``runspec.alertdecl.ALERT_KINDS``, one
#: list; ``controlplane.alerts.rules.KINDS`` gives each its severity; a test holds the two equal).
EventKind = Literal[ALERT_KINDS]  # type: ignore[valid-type]

#: A sink's fields that name a secret (the value is the secret store's, never the alert's).
SECRET_FIELDS = ("url", "key", "token")
SECRET_NAME = _SECRET = r"^[a-z0-9]([-a-z0-9_.]{0,61}[a-z0-9])?$"
#: What a 422 says of a sink's field that is not a secret's name (a URL or a token pasted in).
SECRET_NAME_WORDS = (
    "must be the name of a secret of the workspace (astra secret set NAME), never the URL or token itself"
)


class Sink(RequestBody):
    """Where an alert's messages go (``reconciler.controlplane.alerts.sinks`` says each kind)."""

    kind: Literal["webhook", "slack", "email", "github", "gitlab"]
    url: str | None = Field(
        None, pattern=_SECRET, description="The secret holding the URL (webhook, slack, email)."
    )
    key: str | None = Field(
        None, pattern=_SECRET, description="The secret holding the webhook's signing key."
    )
    token: str | None = Field(
        None, pattern=_SECRET, description="The secret holding the GitHub or GitLab token."
    )
    to: list[str] | None = Field(None, description="E-mail: the addresses.")
    from_: str | None = Field(None, alias="from", description="E-mail: the sender.")
    repo: str | None = Field(  # no ``\s``: see ``PlanStatus.revision``
        None, pattern=r"^[^/\x00-\x20\x7f-\x9f]+/[^/\x00-\x20\x7f-\x9f]+$", description="GitHub: OWNER/NAME."
    )
    project: str | None = Field(None, description="GitLab: the project's id or GROUP/NAME.")
    api: str | None = Field(None, description="GitHub or GitLab: the API's root (a self-hosted one).")


def _seconds(value: Any) -> Any:
    """A duration (``30m``, ``1h30m``) as its seconds; anything else as it is (refused by type)."""
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except ValueError:
            return value
    return _integral(value)


class AlertWrite(RequestBody):
    sink: Sink
    events: list[EventKind] = Field(default_factory=list, description="The kinds selected (none: all).")
    sources: list[str] = Field(default_factory=list, description="The sources selected (none: all).")
    labels: dict[str, str] = Field(default_factory=dict, description="Run labels a run event must have.")
    severity: Literal["info", "warning", "error"] = "info"
    restarts: Annotated[int, Field(ge=1, le=10000), BeforeValidator(_integral)] = Field(
        3, description="run.worker_restarted: after this many restarts."
    )
    waited: Annotated[
        int,
        Field(ge=1),
        BeforeValidator(_seconds),
        WithJsonSchema(
            {
                "anyOf": [
                    {"type": "integer", "minimum": 1},
                    {"type": "string", "pattern": POSITIVE_DURATION_PATTERN},
                ]
            }
        ),
    ] = Field(
        1800, description="run.quota_wait: after a run waited on its quota this long (seconds, or 30m)."
    )
    declared_by: str | None = Field(
        None,
        min_length=1,
        max_length=400,
        description="The source whose astra.yaml declares it (its plan may prune it); none: made by hand.",
    )


class AlertRule(Answer):
    name: str
    workspace: str
    sink: dict[str, Any]
    events: list[str]
    sources: list[str]
    labels: dict[str, str]
    severity: str
    restarts: int = 3
    waited: int = Field(1800, description="run.quota_wait: seconds.")
    declared_by: str | None = None


class AlertList(Answer):
    items: list[AlertRule]


class AlertMessage(Answer):
    """One message of an alert: its event, its state (queued, sent, gave_up), the last answer."""

    alert: str
    key: str
    state: str
    attempts: int
    created_at: float = Field(description=EPOCH)
    done_at: float | None = Field(description=EPOCH)
    next_at: float = Field(description=EPOCH)
    answer: str
    event: dict[str, Any]


class AlertHistory(Answer):
    items: list[AlertMessage]


class PlanStatus(RequestBody):
    """A plan's verdict made in CI (``astra plan --status-context CTX``), posted as a commit status
    by the workspace's commit-status alerts that select its source."""

    source: str = Field(min_length=1, max_length=400, description="The source the plan is of.")
    revision: str = Field(
        # no ``\s``: JSON Schema's (ECMA-262) and Python's differ on it (U+0085 is one in Python)
        pattern=r"^([^@\x00-\x20\x7f-\x9f]+@)?sha1:[0-9a-f]{40}(\+dirty)?$",
        description="The commit: REF@sha1:SHA.",
    )
    state: Literal["success", "failure"]
    description: str = Field(
        min_length=1, max_length=2000, description="One line: the plan, or its first error."
    )
    context: str = Field(min_length=1, max_length=255, description="The status's context (name).")


class PlanStatusQueued(Answer):
    """The alerts that will post the plan's status (none: no commit-status alert selects it)."""

    alerts: list[str] = Field(default_factory=list)
