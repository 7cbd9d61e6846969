"""Local stand-ins for the alerts' sinks: an HTTP receiver on loopback that records each request
and answers what the test scripts (a webhook, Slack, GitHub's and GitLab's statuses APIs), and a
real SMTP server (aiosmtpd) with STARTTLS and login, on loopback."""

from __future__ import annotations

import datetime as dt
import json
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.controlplane_api.conftest import client, plane  # noqa: F401 (the control plane over ASGI)
from tests.controlplane_api.test_sources import wire  # noqa: F401 (an HttpCluster on it)


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


@dataclass
class Receiver:
    """``url`` answers each request with ``answer(request) -> (status, headers, body)``."""

    url: str = ""
    got: list[Received] = field(default_factory=list)
    answer: Callable[[Received], tuple[int, dict[str, str], bytes]] = lambda r: (200, {}, b"ok")


@pytest.fixture
def receiver():
    held = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            got = Received("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            held.got.append(got)
            status, headers, text = held.answer(got)
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("content-length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    held.url = f"http://127.0.0.1:{server.server_port}"
    yield held
    server.shutdown()
    server.server_close()


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key (the SMTP server's; the client trusts it as its CA)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "smtp.pem", folder / "smtp.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


@dataclass
class Mailbox:
    url: str
    messages: list = field(default_factory=list)
    #: the aiosmtpd controller (its ``handler`` may be changed before a connection is made)
    controller: object = None


@pytest.fixture
def smtp(tmp_path):
    """aiosmtpd on loopback: STARTTLS required before login, login ``astra`` / ``s3cret``."""
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult

    cert, key = self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    box = Mailbox("")

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            box.messages.append(envelope)
            return "250 OK"

    def authenticate(server, session, envelope, mechanism, auth_data):
        good = auth_data.login == b"astra" and auth_data.password == b"s3cret"
        return AuthResult(success=good, handled=False)  # handled=False: the server answers 535

    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(
        Handler(),
        hostname="127.0.0.1",
        port=port,
        tls_context=context,
        require_starttls=True,
        authenticator=authenticate,
        auth_require_tls=True,
    )
    controller.start()
    box.controller = controller
    box.url = f"smtp://astra:s3cret@127.0.0.1:{port}?starttls=true&cafile={cert}"
    yield box
    controller.stop()
