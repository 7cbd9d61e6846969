"""A run that fails is told exactly once to a Slack stand-in and once by e-mail (a real SMTP
server, aiosmtpd with STARTTLS and login), and still exactly once after the live ``astra server``
is killed (SIGKILL) in the middle of a send and started again: once in the middle of the Slack
send, once in the middle of the e-mail's (after its ``DATA``, before the server's ``250``).

"Exactly once" is what can be held to: a Slack webhook and SMTP take no idempotency key, so a
message in flight when the sender dies may reach the receiver twice. The stand-in holds its
answer to the first request until the server's connection is gone (the server died waiting),
and never answers it: that request was never *accepted* (no 2xx reached the sender). After the
restart the outbox, which recorded the attempt before the send and no answer, sends the same
bytes again; that one is answered. So the receiver sees two requests, the same body, and
accepts exactly one; the e-mail, sent and recorded before the kill, is never sent again
(docs/notifications.md, "Delivery across a crash"). The SMTP server does the same with the
e-mail: it holds its ``250`` to the first ``DATA`` until the sender is gone, and so never takes
that message (an SMTP server takes a message with its ``250``, RFC 5321 §4.1.1.4); after the
restart the same message is sent again and taken once, and the Slack message, not yet begun at
the kill, is sent once."""

from __future__ import annotations

import asyncio
import json
import select
import signal
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from reconciler.controlplane.alerts.delivery import CUT_OFF
from tests.controlplane_api.conftest import LiveServer, until
from tests.controlplane_api.test_api import tiny

from .conftest import Mailbox


class Chat:
    """A Slack stand-in on loopback: ``got`` (each request's body), ``accepted`` (the bodies
    answered 200); the first request is held unanswered until its sender's connection closes."""

    def __init__(self, hold: bool = True) -> None:
        self.got: list[bytes] = []
        self.accepted: list[bytes] = []
        self.cut_off = threading.Event()
        chat = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                chat.got.append(body)
                if hold and len(chat.got) == 1:  # hold the answer until the sender is gone
                    gone = select.select([self.connection], [], [], 60)[0]  # readable: it closed
                    if gone and self.connection.recv(1, socket.MSG_PEEK) == b"":
                        chat.cut_off.set()
                    self.close_connection = True
                    return
                self.send_response(200)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
                chat.accepted.append(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/T0/B0/x"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class HeldMail:
    """The ``smtp`` fixture's server made to hold its answer to the first ``DATA`` until the
    sender's connection is gone, and then not take the message (``got``: each ``DATA``;
    ``box.messages``: the ones taken, answered ``250``)."""

    def __init__(self, box: Mailbox) -> None:
        self.got: list[bytes] = []
        self.cut_off = threading.Event()
        held = self

        async def handle_data(server, session, envelope):
            held.got.append(envelope.content)
            if len(held.got) == 1:
                try:
                    await asyncio.sleep(60)  # aiosmtpd cancels this when the connection is lost
                except asyncio.CancelledError:
                    held.cut_off.set()  # the sender is gone before the 250: not taken
                    raise
            box.messages.append(envelope)
            return "250 OK"

        box.controller.handler.handle_DATA = handle_data  # type: ignore[attr-defined]


@pytest.mark.parametrize("cut", ["slack", "email"])
def test_a_failed_run_is_told_once_to_slack_and_by_mail_though_the_server_is_killed_mid_send(
    tmp_path, smtp, cut
):
    chat = Chat(hold=cut == "slack")
    mail_held = HeldMail(smtp) if cut == "email" else None
    cwd = tmp_path / "work"
    cwd.mkdir()
    live = LiveServer(tmp_path / "home", cwd).start()
    try:
        for name, value in (("chat-url", chat.url), ("smtp-url", smtp.url)):
            assert live.api("PUT", f"/secrets/{name}", content=value.encode()).status_code == 201
        mail = {"kind": "email", "url": "smtp-url", "to": ["ops@example.com"], "from": "astra@example.com"}
        for name, sink in (("inbox", mail), ("team-chat", {"kind": "slack", "url": "chat-url"})):
            body = {"sink": sink, "events": ["run.failed"]}
            assert live.api("PUT", f"/alerts/{name}", json=body).status_code == 201
        live.api("POST", "/runs", json=tiny("boom", command="exit 3"))
        if mail_held is None:
            until(lambda: chat.got, what="the Slack send to start")  # the e-mail went first (by name)
            assert len(smtp.messages) == 1
        else:
            until(lambda: mail_held.got, what="the e-mail's DATA")  # the e-mail goes first (by name)
            assert chat.got == []
        assert live.proc is not None
        live.proc.send_signal(signal.SIGKILL)  # mid-send: the receiver has not answered
        live.proc.wait(timeout=30)
        if mail_held is None:
            assert chat.cut_off.wait(30) and chat.accepted == []
        else:
            assert mail_held.cut_off.wait(30) and smtp.messages == []
        live.start()  # the same home and store
        until(lambda: chat.accepted and smtp.messages, what="the messages sent after the restart")
        until(
            lambda: all(m["state"] == "sent" for m in live.api("GET", "/alerts:history").json()["items"]),
            what="both recorded as sent",
        )
        history = {m["alert"]: m for m in live.api("GET", "/alerts:history").json()["items"]}
        live.api("POST", "/alerts/inbox/test")  # a later message goes through: the queue is past it
        until(lambda: len(smtp.messages) == 2, what="the test mail")
    finally:
        live.stop()
        chat.close()
    assert len(chat.accepted) == 1  # the Slack message accepted once
    assert json.loads(chat.accepted[0])["text"].startswith("[error] run boom Failed")
    subjects = [m.content.decode().split("Subject: ")[1].split("\n")[0].strip() for m in smtp.messages]
    assert [s.startswith("[astra error] run boom Failed") for s in subjects] == [True, False]  # taken once
    slack, inbox = history["team-chat"], history["inbox"]
    if mail_held is None:
        assert len(chat.got) == 2 and chat.got[0] == chat.got[1]  # the same bytes, sent twice
        assert (slack["state"], slack["attempts"]) == ("sent", 2)
        assert CUT_OFF.format(n=1) in slack["answer"] and "200" in slack["answer"]
        assert (inbox["state"], inbox["attempts"]) == ("sent", 1)
    else:
        assert len(mail_held.got) == 3 and mail_held.got[0] == mail_held.got[1]  # the same e-mail again
        assert len(chat.got) == 1 and (slack["state"], slack["attempts"]) == ("sent", 1)
        assert (inbox["state"], inbox["attempts"]) == ("sent", 2) and CUT_OFF.format(n=1) in inbox["answer"]
