"""Where an alert's messages go: what each sink sends for an event, and how its answer is read.

A sink is named in an alert as ``{"kind": KIND, …}``; what is secret (a webhook's URL, its
signing key, a token, the SMTP server's URL with its password) is named, never given: the value
is read through ``secrets(workspace, name) -> bytes | None`` (the workspace's secret store) when
the message is sent, and is never in the alert, a payload, an error or the history.

===========  ==========================================================================  =========
kind         what is sent                                                                secrets
===========  ==========================================================================  =========
``webhook``  ``POST`` of the event's JSON (``SCHEMA`` version 1: ``schema``, ``id``, the  ``url``,
             event's fields), ``X-Astra-Signature: sha256=HMAC(key, "TIMESTAMP.BODY")``,  ``key``
             ``X-Astra-Timestamp``, ``Idempotency-Key`` (the event's key)
``slack``    ``POST {"text": …}``: a Slack incoming webhook; Mattermost, Rocket.Chat,    ``url``
             Zulip's Slack-compatible and Discord's ``/slack`` endpoints take the same
``email``    a message over SMTP: STARTTLS when the URL is ``smtp://…?starttls=true``    ``url``
             (or ``smtps://``), login with the URL's user and password; ``to``, ``from``
``github``   ``POST {api}/repos/{repo}/statuses/{sha}`` with ``Bearer`` token:            ``token``
             ``state``, ``description``, ``context`` ``astra/<cluster>/<source>``,
             ``target_url`` (the source's console page)
``gitlab``   ``POST {api}/projects/{project}/statuses/{sha}`` with ``PRIVATE-TOKEN``:     ``token``
             ``state``, ``description``, ``name`` (the context), ``target_url``
===========  ==========================================================================  =========

A commit status's context names the cluster and the source, so that two clusters (or two
sources of one repository) never overwrite each other's status on one commit. Its description
is one line (GitHub keeps 140 characters). The commit is the event's revision
(``main@sha1:SHA``); an event without one sends no commit status.

``send`` answers an ``Answer``: sent (2xx), retried later (an error, a timeout, 5xx, 429 with
its ``Retry-After``), or refused for good (any other 4xx: a wrong token is not made right by a
retry). Its words never hold a secret.

Must not touch: the outbox (``delivery``), the store, the clock.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import smtplib
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from .rules import Event

__all__ = ["SCHEMA", "SINKS", "Answer", "Outgoing", "Secrets", "SinkError", "outgoing", "send"]

#: The version of the webhook's JSON (``docs/notifications.md`` describes it).
SCHEMA = "astra.alert/v1"
SINKS = ("webhook", "slack", "email", "github", "gitlab")
#: Seconds a send may take before it is an error (a sink that hangs is retried, then given up).
TIMEOUT = 10.0

#: The workspace's secrets: ``(workspace, name) -> value`` (``None``: no such secret).
Secrets = Callable[[str, str], "bytes | None"]

_COMMIT_STATE = {
    "source.pending": ("pending", "pending"),
    "source.ready": ("success", "success"),
    "source.stalled": ("failure", "failed"),
    "source.load_failed": ("failure", "failed"),
    "source.fetch_failed": ("error", "failed"),
    "plan.success": ("success", "success"),
    "plan.failure": ("failure", "failed"),
}


class SinkError(Exception):
    """A sink that cannot be used as it is named (a secret not set, a field missing): said in
    words that name the secret, never its value."""


@dataclass(frozen=True)
class Outgoing:
    """What is sent: an HTTP request (``url`` …) or an e-mail (``mail``, over ``smtp``)."""

    method: str = "POST"
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    mail: EmailMessage | None = None
    smtp: str = ""
    #: what may be said of where it went (no secret: the host, or the repository)
    shown: str = ""


@dataclass(frozen=True)
class Answer:
    """A send's outcome: ``sent``; else ``retry`` (with ``after`` seconds when the sink said) or
    given up for good; ``words`` say the answer (status and a bounded, secret-free excerpt)."""

    sent: bool
    retry: bool
    words: str
    after: float | None = None


def _secret(secrets: Secrets, workspace: str, sink: dict[str, Any], key: str) -> str:
    name = sink.get(key)
    if not name:
        raise SinkError(f"the {sink.get('kind')} sink names no secret for its {key} ('{key}: SECRET_NAME')")
    value = secrets(workspace, str(name))
    if value is None:
        raise SinkError(f"secret {name} is not set in workspace {workspace} ('astra secret set {name}')")
    return value.decode().strip()


def _commit(event: Event) -> str | None:
    revision = event.revision or ""
    _, sep, sha = revision.partition("sha1:")
    sha = sha.removesuffix("+dirty")
    return sha if sep and sha else None


def _line(text: str, limit: int = 140) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def outgoing(sink: dict[str, Any], event: Event, secrets: Secrets, now: float) -> Outgoing | None:
    """What ``sink`` sends for ``event`` (``None``: nothing, a commit status without a commit);
    ``SinkError`` when it cannot be made."""
    kind = sink.get("kind")
    ws = event.workspace
    if kind == "webhook":
        body = json.dumps({"schema": SCHEMA, "id": event.key, **event.to_json()}, sort_keys=True).encode()
        stamp = str(int(now))
        key = _secret(secrets, ws, sink, "key").encode()
        signature = hmac.new(key, stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
        headers = {
            "Content-Type": "application/json",
            "X-Astra-Signature": f"sha256={signature}",
            "X-Astra-Timestamp": stamp,
            "Idempotency-Key": event.key,
        }
        url = _secret(secrets, ws, sink, "url")
        return Outgoing(url=url, headers=headers, body=body, shown=urlsplit(url).hostname or "")
    if kind == "slack":
        link = f" <{event.link}|open>" if event.link else ""
        body = json.dumps({"text": f"[{event.severity}] {event.text}{link}"}).encode()
        url = _secret(secrets, ws, sink, "url")
        return Outgoing(
            url=url,
            headers={"Content-Type": "application/json"},
            body=body,
            shown=urlsplit(url).hostname or "",
        )
    if kind == "email":
        return _mail(sink, event, _secret(secrets, ws, sink, "url"))
    if kind in ("github", "gitlab"):
        return _status(str(kind), sink, event, secrets)
    raise SinkError(f"no sink of kind {kind!r}: one of {', '.join(SINKS)}")


def _mail(sink: dict[str, Any], event: Event, url: str) -> Outgoing:
    to = sink.get("to") or []
    if isinstance(to, str):
        to = [to]
    if not to or not sink.get("from"):
        raise SinkError("the email sink needs 'to' (addresses) and 'from'")
    mail = EmailMessage()
    mail["Subject"] = f"[astra {event.severity}] {_line(event.text, 120)}"
    mail["From"] = str(sink["from"])
    mail["To"] = ", ".join(str(t) for t in to)
    mail["Message-ID"] = f"<{hashlib.sha256(event.key.encode()).hexdigest()[:32]}@astra>"
    mail.set_content(event.text + (f"\n\n{event.link}\n" if event.link else "\n"))
    return Outgoing(mail=mail, smtp=url, shown=urlsplit(url).hostname or "")


def _status(kind: str, sink: dict[str, Any], event: Event, secrets: Secrets) -> Outgoing | None:
    sha = _commit(event)
    states = _COMMIT_STATE.get(event.kind)
    if sha is None or states is None or event.source is None:
        return None
    token = _secret(secrets, event.workspace, sink, "token")
    context = event.context or f"astra/{event.cluster}/{event.source}"
    description = _line(event.text.split(": ", 1)[-1] if ": " in event.text else event.text)
    if kind == "github":
        repo = str(sink.get("repo") or "")
        if repo.count("/") != 1:
            raise SinkError("the github sink needs 'repo: OWNER/NAME'")
        api = str(sink.get("api") or "https://api.github.com").rstrip("/")
        url = f"{api}/repos/{repo}/statuses/{sha}"
        body = {"state": states[0], "description": description, "context": context}
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        }
    else:
        project = str(sink.get("project") or "")
        if not project:
            raise SinkError("the gitlab sink needs 'project' (its id, or GROUP/NAME)")
        api = str(sink.get("api") or "https://gitlab.com/api/v4").rstrip("/")
        url = f"{api}/projects/{quote(project, safe='')}/statuses/{sha}"
        body = {"state": states[1], "description": description, "name": context}
        headers = {"PRIVATE-TOKEN": token}
    if event.link:
        body["target_url"] = event.link
    headers["Content-Type"] = "application/json"
    return Outgoing(
        url=url, headers=headers, body=json.dumps(body).encode(), shown=urlsplit(url).hostname or ""
    )


def send(out: Outgoing, *, timeout: float = TIMEOUT) -> Answer:
    """Send ``out`` (see the module docstring for how the answer is read)."""
    if out.mail is not None:
        return _send_mail(out, timeout)
    import httpx

    try:
        response = httpx.request(out.method, out.url, headers=out.headers, content=out.body, timeout=timeout)
    except httpx.HTTPError as exc:
        return Answer(False, True, f"{out.shown}: {type(exc).__name__}")
    excerpt = _line(response.text, 200) if response.text else ""
    words = f"{out.shown}: {response.status_code}" + (f" {excerpt}" if excerpt else "")
    if 200 <= response.status_code < 300:
        return Answer(True, False, words)
    if response.status_code == 429 or response.status_code >= 500:
        return Answer(False, True, words, _retry_after(response.headers.get("retry-after")))
    return Answer(False, False, words)


def _retry_after(value: str | None) -> float | None:
    """``Retry-After``'s seconds (an HTTP date is read too); ``None`` when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return _seconds_until(value)


def _seconds_until(http_date: str) -> float | None:
    """The seconds from now to an HTTP date (``Retry-After``'s other form), or ``None``."""
    import time
    from email.utils import parsedate_to_datetime

    try:
        return max(0.0, parsedate_to_datetime(http_date).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _send_mail(out: Outgoing, timeout: float) -> Answer:
    parts = urlsplit(out.smtp)
    query = dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p)
    host, port = parts.hostname or "localhost", parts.port
    assert out.mail is not None
    try:
        if parts.scheme == "smtps":
            client: smtplib.SMTP = smtplib.SMTP_SSL(host, port or 465, timeout=timeout, context=_tls(query))
        else:
            client = smtplib.SMTP(host, port or 25, timeout=timeout)
        with client:
            if parts.scheme != "smtps" and query.get("starttls", "").lower() in ("1", "true", "yes"):
                client.starttls(context=_tls(query))
            if parts.username:
                client.login(unquote(parts.username), unquote(parts.password or ""))
            refused = client.send_message(out.mail)
    except smtplib.SMTPResponseException as exc:
        words = f"{out.shown}: SMTP {exc.smtp_code}"
        return Answer(False, 400 <= exc.smtp_code < 500, words)  # 4xx: try again later; 5xx: for good
    except (OSError, smtplib.SMTPException) as exc:
        return Answer(False, True, f"{out.shown}: {type(exc).__name__}")
    if refused:
        return Answer(False, False, f"{out.shown}: refused {', '.join(sorted(refused))}")
    return Answer(True, False, f"{out.shown}: 250 sent")


def _tls(query: dict[str, str]) -> ssl.SSLContext:
    """The TLS context: the system's trust, or ``cafile=PATH`` (a local server's own CA)."""
    return ssl.create_default_context(cafile=unquote(query["cafile"]) if "cafile" in query else None)
