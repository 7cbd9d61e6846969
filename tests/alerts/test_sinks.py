"""Each sink's request, as the host documents it, sent to a local stand-in.

GitHub and GitLab cannot be reached from here: their statuses APIs are stood in for by a local
HTTP server that checks each documented request shape (GitHub: ``POST
/repos/{owner}/{repo}/statuses/{sha}``, ``Authorization: Bearer``, ``Accept:
application/vnd.github+json``, body ``state`` in error|failure|pending|success, ``context``,
``description``, ``target_url``; GitLab: ``POST /projects/{id}/statuses/{sha}``,
``PRIVATE-TOKEN``, body ``state`` in pending|running|success|failed|canceled, ``name``,
``description``, ``target_url``) and answers 201 as the hosts do. E-mail goes to a real SMTP
server (aiosmtpd) on loopback, over STARTTLS with a login."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from reconciler.controlplane.alerts import sinks
from reconciler.controlplane.alerts.rules import Event

SHA = "3f8a8194c2f0e7a1b5d6c9e8f7a6b5c4d3e2f1a0"
NOW = 1_700_000_000.0


def secrets_of(values: dict[str, str]):
    return lambda workspace, name: values[name].encode() if name in values else None


def failed(revision: str = f"main@sha1:{SHA}") -> Event:
    return Event(
        "source.stalled",
        f"source/default/default/team/{revision}/Stalled/ValidationFailed",
        "default/default",
        "source team Stalled ValidationFailed at main: "
        "runs/a.yaml:3:5: spec.array.size: must be from 1 to 10000",
        NOW,
        source="team",
        revision=revision,
        link="http://127.0.0.1:8750/o/default/w/default/sources",
        cluster="gpu-east",
    )


def test_github_gets_a_commit_status_with_the_cluster_and_source_in_its_context(receiver):
    def github(r):
        ok = (
            r.path == f"/repos/acme/runs/statuses/{SHA}"
            and r.headers.get("authorization") == "Bearer ghp_token"
            and r.headers.get("accept") == "application/vnd.github+json"
            and r.json()["state"] in ("error", "failure", "pending", "success")
            and set(r.json()) <= {"state", "target_url", "description", "context"}
        )
        return (201, {}, b'{"id": 1}') if ok else (422, {}, b'{"message": "Validation Failed"}')

    receiver.answer = github
    sink = {"kind": "github", "repo": "acme/runs", "token": "gh", "api": receiver.url}
    out = sinks.outgoing(sink, failed(), secrets_of({"gh": "ghp_token"}), NOW)
    answer = sinks.send(out)
    assert answer.sent, answer.words
    body = receiver.got[0].json()
    assert body == {
        "state": "failure",
        "context": "astra/gpu-east/team",
        "description": "runs/a.yaml:3:5: spec.array.size: must be from 1 to 10000",
        "target_url": "http://127.0.0.1:8750/o/default/w/default/sources",
    }
    assert "ghp_token" not in answer.words


def test_gitlab_gets_a_commit_status_named_by_the_context(receiver):
    def gitlab(r):
        ok = (
            r.path == f"/api/v4/projects/acme%2Fruns/statuses/{SHA}"
            and r.headers.get("private-token") == "glpat"
            and r.json()["state"] in ("pending", "running", "success", "failed", "canceled")
        )
        return (201, {}, b"{}") if ok else (400, {}, b"{}")

    receiver.answer = gitlab
    sink = {"kind": "gitlab", "project": "acme/runs", "token": "gl", "api": receiver.url + "/api/v4"}
    assert sinks.send(sinks.outgoing(sink, failed(), secrets_of({"gl": "glpat"}), NOW)).sent
    assert receiver.got[0].json()["name"] == "astra/gpu-east/team"
    assert receiver.got[0].json()["state"] == "failed"


def test_a_webhook_is_signed_over_its_timestamp_and_body_and_carries_an_idempotency_key(receiver):
    sink = {"kind": "webhook", "url": "hook-url", "key": "hook-key"}
    out = sinks.outgoing(
        sink, failed(), secrets_of({"hook-url": receiver.url + "/in", "hook-key": "k3y"}), NOW
    )
    assert sinks.send(out).sent
    got = receiver.got[0]
    stamp = got.headers["x-astra-timestamp"]
    wanted = hmac.new(b"k3y", stamp.encode() + b"." + got.body, hashlib.sha256).hexdigest()
    assert got.headers["x-astra-signature"] == f"sha256={wanted}"
    assert got.headers["idempotency-key"] == failed().key
    body = got.json()
    assert (
        body["schema"] == "astra.alert/v1"
        and body["kind"] == "source.stalled"
        and body["severity"] == "error"
    )
    assert "k3y" not in got.body.decode() and receiver.url not in got.body.decode()


def test_slack_gets_one_line_of_text(receiver):
    out = sinks.outgoing(
        {"kind": "slack", "url": "slack"}, failed(), secrets_of({"slack": receiver.url}), NOW
    )
    assert sinks.send(out).sent
    assert receiver.got[0].json() == {
        "text": "[error] " + failed().text + " <http://127.0.0.1:8750/o/default/w/default/sources|open>"
    }


def test_email_goes_over_starttls_with_a_login_to_a_real_smtp_server(smtp):
    sink = {"kind": "email", "url": "smtp", "to": ["ops@example.com"], "from": "astra@example.com"}
    answer = sinks.send(sinks.outgoing(sink, failed(), secrets_of({"smtp": smtp.url}), NOW))
    assert answer.sent, answer.words
    (mail,) = smtp.messages
    assert mail.rcpt_tos == ["ops@example.com"]
    text = mail.content.decode()
    assert "Subject: [astra error] source team Stalled" in text and "spec.array.size" in text
    wrong = smtp.url.replace("s3cret", "nope")
    refused = sinks.send(sinks.outgoing(sink, failed(), secrets_of({"smtp": wrong}), NOW))
    assert (
        not refused.sent
        and not refused.retry
        and "nope" not in refused.words
        and "s3cret" not in refused.words
    )


def test_a_sink_whose_secret_is_not_set_says_which_by_name():
    with pytest.raises(sinks.SinkError, match="secret slack-url is not set in workspace default/default"):
        sinks.outgoing({"kind": "slack", "url": "slack-url"}, failed(), secrets_of({}), NOW)


def test_a_commit_status_is_not_sent_for_an_event_without_a_commit():
    sink = {"kind": "github", "repo": "acme/runs", "token": "gh"}
    assert sinks.outgoing(sink, failed("sha256:abc"), secrets_of({"gh": "t"}), NOW) is None


def test_the_answers_are_read_as_sent_retried_or_refused(receiver):
    out = sinks.outgoing({"kind": "slack", "url": "s"}, failed(), secrets_of({"s": receiver.url}), NOW)
    receiver.answer = lambda r: (503, {}, b"busy")
    assert (sinks.send(out).sent, sinks.send(out).retry) == (False, True)
    receiver.answer = lambda r: (429, {"Retry-After": "2"}, b"")
    assert sinks.send(out).after == 2.0
    receiver.answer = lambda r: (404, {}, b"no_service")
    assert (sinks.send(out).sent, sinks.send(out).retry) == (False, False)
    json.dumps(sinks.send(out).words)  # plain words
