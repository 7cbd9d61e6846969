"""Alerts declared in ``astra.yaml`` (issue 34): a source's ``alerts:``, applied like its runs.

```yaml
sources:
  - name: team-a
    path: runs
    alerts:
      - name: failures
        sink: {kind: slack, url: slack-url}      # url: a secret's NAME (astra secret set slack-url)
        events: [run.failed, source.stalled]
        severity: error
```

Owns the model (``AlertDecl``, ``AlertSink``) whose schema the published ``astra.schema.json``
holds, with the words of each mistake: a sink's URL, key or token is the name of a workspace's
secret, never the value (astra.yaml is in git); an event is one of ``ALERT_KINDS``; a name is a
DNS label, as the API's. The same fields as ``PUT /alerts/{name}`` (``reconciler.wire.alerts``);
a test holds ``ALERT_KINDS`` equal to the control plane's (``controlplane.alerts.rules.KINDS``).

Must not touch: the control plane, HTTP (the spec layer imports no other part).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from . import messages as msg
from .quantities import POSITIVE_DURATION_PATTERN, parse_duration

__all__ = ["ALERT_KINDS", "ALERT_NAME", "SINK_SECRET", "AlertDecl", "AlertSink", "sink_requirements"]

#: The kinds of event an alert may select (the control plane's ``rules.KINDS``, held equal by a test).
ALERT_KINDS = (
    "run.failed",
    "run.cancelled",
    "run.completed",
    "run.worker_restarted",
    "run.quota_wait",
    "run.replace_held",
    "run.replaced",
    "source.stalled",
    "source.load_failed",
    "source.fetch_failed",
    "source.ready",
    "source.pending",
    "source.suspended",
    "source.resumed",
    "alert.gave_up",
    "plan.success",
    "plan.failure",
)


def _duration(value: Any) -> Any:
    if isinstance(value, str) and not isinstance(value, bool):
        try:
            return parse_duration(value)
        except ValueError:
            return value  # not a duration: the schema's pattern says so
    return value


#: run.quota_wait's limit: a duration as a run's time limit is written (30m, 2h) or seconds.
Waited = Annotated[
    int,
    BeforeValidator(_duration),
    WithJsonSchema(
        {
            "title": "Waited",
            "description": "run.quota_wait: told when a run has waited on its workspace's quota this long "
            "(30m, 2h, or seconds).",
            "type": ["integer", "string"],
            "minimum": 1,
            "pattern": POSITIVE_DURATION_PATTERN,
            "errorMessage": msg.DURATION,
        }
    ),
]
ALERT_NAME = "an alert's name is lower-case letters, digits and '-' (at most 63), as a DNS label: failures"
SINK_SECRET = (
    "the name of a secret of the workspace (astra secret set NAME), never the URL or token itself: "
    "astra.yaml is in git"
)
_SECRET_NAME = r"^[a-z0-9]([-a-z0-9_.]{0,61}[a-z0-9])?$"


def _secret(what: str) -> object:
    return Field(
        None,
        title=what[0].upper() + what[1:],
        description=f"The name of the secret holding the {what} (astra secret set NAME).",
        pattern=_SECRET_NAME,
        json_schema_extra={"errorMessage": SINK_SECRET},
    )


class AlertSink(BaseModel):
    """Where an alert's messages go: its kind and the names of the secrets it reads."""

    model_config = ConfigDict(extra="forbid", title="Sink", populate_by_name=True)

    kind: Literal["webhook", "slack", "email", "github", "gitlab"] = Field(
        title="Kind",
        description="webhook (signed JSON), slack (Slack or Mattermost), email (SMTP), github or gitlab "
        "(commit statuses).",
    )
    url: str | None = _secret("URL")  # type: ignore[assignment]
    key: str | None = _secret("signing key")  # type: ignore[assignment]
    token: str | None = _secret("token")  # type: ignore[assignment]
    to: list[str] | None = Field(None, title="To", description="E-mail: the addresses.")
    from_: str | None = Field(None, alias="from", title="From", description="E-mail: the sender.")
    repo: str | None = Field(
        None,
        title="Repository",
        description="GitHub: OWNER/NAME.",
        pattern=r"^[^/\x00-\x20\x7f-\x9f]+/[^/\x00-\x20\x7f-\x9f]+$",
        json_schema_extra={"errorMessage": "a GitHub repository is OWNER/NAME: acme/runs"},
    )
    project: str | None = Field(None, title="Project", description="GitLab: the project's id or GROUP/NAME.")
    api: str | None = Field(
        None, title="API", description="GitHub or GitLab: the API's root (a self-hosted one)."
    )


class AlertDecl(BaseModel):
    """An alert of the source's workspace: which events it selects, and its sink."""

    model_config = ConfigDict(extra="forbid", title="Alert")

    name: str = Field(
        title="Name",
        description="The alert's name in the workspace (astra alert list).",
        pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
        json_schema_extra={"errorMessage": ALERT_NAME},
    )
    sink: AlertSink = Field(title="Sink")
    events: list[Literal[ALERT_KINDS]] = Field(  # type: ignore[valid-type]
        default_factory=list,
        title="Events",
        description="The kinds of event selected (none: all).",
    )
    sources: list[str] = Field(
        default_factory=list, title="Sources", description="The sources selected (none: all)."
    )
    labels: dict[str, str] = Field(
        default_factory=dict, title="Labels", description="Run labels a run event must have."
    )
    severity: Literal["info", "warning", "error"] = Field(
        "info",
        title="Severity",
        description="The least severity selected.",
    )
    restarts: int = Field(
        3,
        ge=1,
        le=10000,
        title="Restarts",
        description="run.worker_restarted: told when a worker has restarted this many times.",
        json_schema_extra={"errorMessage": "restarts is a whole number from 1 to 10000"},
    )
    waited: Waited = Field(1800, ge=1)


def sink_requirements() -> list[dict[str, object]]:
    """The schema's if/then blocks of what each sink kind needs (the words a sink would say
    when it is used, said at validate instead)."""
    needs = {
        "webhook": (["url"], "a webhook sink needs url: the name of the secret holding its URL"),
        "slack": (["url"], "a slack sink needs url: the name of the secret holding its incoming webhook"),
        "email": (["url", "to", "from"], "an email sink needs url (a secret: smtp://…), to and from"),
        "github": (["token", "repo"], "a github sink needs token (a secret's name) and repo: OWNER/NAME"),
        "gitlab": (["token", "project"], "a gitlab sink needs token (a secret's name) and project"),
    }
    return [
        {
            "if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]},
            "then": {"required": fields, "errorMessage": words},
        }
        for kind, (fields, words) in needs.items()
    ]
