"""A run that fails is told exactly once to a Slack stand-in and once by e-mail (a real SMTP
server, aiosmtpd with STARTTLS and login), and still exactly once after the live ``astra server``
is killed (SIGKILL) in the middle of the Slack send and started again.

"Exactly once" is what can be held to: a Slack webhook and SMTP take no idempotency key, so a
message in flight when the sender dies may reach the receiver twice. The stand-in holds its
answer to the first request until the server's connection is gone (the server died waiting),
and never answers it: that request was never *accepted* (no 2xx reached the sender). After the
restart the outbox, which recorded the attempt before the send and no answer, sends the same
bytes again; that one is answered. So the receiver sees two requests, the same body, and
accepts exactly one; the e-mail, sent and recorded before the kill, is never sent again
(docs/notifications.md, "Delivery across a crash")."""

from __future__ import annotations

import json
import select
import signal
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from reconciler.controlplane.alerts.delivery import CUT_OFF
from tests.controlplane_api.conftest import LiveServer, until
from tests.controlplane_api.test_api import tiny


class Chat:
    """A Slack stand-in on loopback: ``got`` (each request's body), ``accepted`` (the bodies
    answered 200); the first request is held unanswered until its sender's connection closes."""

    def __init__(self) -> None:
        self.got: list[bytes] = []
        self.accepted: list[bytes] = []
        self.cut_off = threading.Event()
        chat = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                chat.got.append(body)
                if len(chat.got) == 1:  # hold the answer until the sender is gone
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


def test_a_failed_run_is_told_once_to_slack_and_by_mail_though_the_server_is_killed_mid_send(tmp_path, smtp):
    chat = Chat()
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
        until(lambda: chat.got, what="the Slack send to start")  # the e-mail went first (by name)
        assert len(smtp.messages) == 1
        assert live.proc is not None
        live.proc.send_signal(signal.SIGKILL)  # mid-send: the stand-in has not answered
        live.proc.wait(timeout=30)
        assert chat.cut_off.wait(30) and chat.accepted == []
        live.start()  # the same home and store
        until(lambda: chat.accepted, what="the message sent again after the restart")
        history = {m["alert"]: m for m in live.api("GET", "/alerts:history").json()["items"]}
        live.api("POST", "/alerts/inbox/test")  # a later message goes through: the queue is past it
        until(lambda: len(smtp.messages) == 2, what="the test mail")
    finally:
        live.stop()
        chat.close()
    assert len(chat.got) == 2 and chat.got[0] == chat.got[1]  # the same bytes, sent twice
    assert len(chat.accepted) == 1  # and accepted once
    assert json.loads(chat.accepted[0])["text"].startswith("[error] run boom Failed")
    subjects = [m.content.decode().split("Subject: ")[1].split("\n")[0].strip() for m in smtp.messages]
    assert [s.startswith("[astra error] run boom Failed") for s in subjects] == [True, False]
    slack, inbox = history["team-chat"], history["inbox"]
    assert (slack["state"], slack["attempts"]) == ("sent", 2)
    assert CUT_OFF.format(n=1) in slack["answer"] and "200" in slack["answer"]
    assert (inbox["state"], inbox["attempts"]) == ("sent", 1)
