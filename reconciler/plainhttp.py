"""Plain HTTP/1.1 GETs on a socket, for the few reads a short process makes before it needs a
client: httpx costs 40 ms of CPU to import and set up, ``http.client`` 17 ms of imports.

``get(url, headers, timeout)`` sends one GET on a connection of its own (``Connection: close``)
and reads the answer to its end: an ``Answer`` (status, headers, body, de-chunked: a refusal, a
404 say, is an answer too), or ``None`` when it cannot be read as HTTP/1.x (the caller then asks
httpx, which says what is wrong). It
raises ``OSError`` when the server cannot be reached. ``plain(url)`` says whether a URL may be
read so: ``http://`` with a host in ASCII, no user in it, and no proxy in the environment (httpx
would go through it).

Used by ``HttpCluster(plain_gets=True)``: the read-ahead's forked process (the inventory and the
run summaries, before it ends), and the CLI's commands that only read (``cli.connect`` with
``start=False``: ``astra get``, ``describe``, ``logs``, ``status``, ``source list``), which make a
few GETs and end; and by ``cli.local_server``'s look at a local server's ``/healthz``.

Must not touch: httpx, anything but the socket.
"""

from __future__ import annotations

import os
import socket
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Answer", "get", "plain"]

#: An answer's head larger than this is no answer of ours.
_HEAD_MAX = 65536


class Answer:
    """An answer read whole: what callers of ``HttpCluster.request`` read of an httpx response
    (``headers``: lower-case names). A plain class, as light to import as the module."""

    __slots__ = ("content", "headers", "reason_phrase", "status_code", "url")

    def __init__(
        self, status_code: int, headers: dict[str, str], content: bytes, url: str, reason_phrase: str = ""
    ):
        self.status_code, self.headers, self.content, self.url = status_code, headers, content, url
        self.reason_phrase = reason_phrase

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    @property
    def text(self) -> str:
        """The body as text, in the charset its ``Content-Type`` names (else UTF-8), as httpx
        decodes it (a byte it cannot read as U+FFFD)."""
        charset = "utf-8"
        for part in self.headers.get("content-type", "").split(";")[1:]:
            key, eq, value = part.strip().partition("=")
            if eq and key.lower() == "charset":
                charset = value.strip().strip('"') or charset
        try:
            return self.content.decode(charset, errors="replace")
        except LookupError:  # a charset Python does not know: httpx reads it as UTF-8 too
            return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body read (orjson; what it refuses, as a 65-bit integer, is read by ``json``)."""
        import json

        import orjson

        try:
            return orjson.loads(self.content)
        except orjson.JSONDecodeError:
            return json.loads(self.content)


def plain(url: str) -> bool:
    """Whether ``url`` may be read with ``get``: plain ``http://`` to a host named in ASCII, no
    user in it, no proxy in the environment."""
    parts = urlsplit(url)
    return (
        parts.scheme == "http"
        and bool(parts.hostname)
        and (parts.hostname or "").isascii()
        and "@" not in parts.netloc
        and not any(k.lower() in ("http_proxy", "all_proxy") for k in os.environ)
    )


def get(url: str, headers: dict[str, str], timeout: float) -> Answer | None:
    """One GET of ``url`` (see the module docstring)."""
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    head = [f"GET {target} HTTP/1.1", f"Host: {parts.netloc}", "Connection: close"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    where = ((parts.hostname or "").encode("ascii"), parts.port or 80)  # bytes: no idna codec (2 ms)
    chunks = []
    with socket.create_connection(where, timeout=timeout) as conn:  # type: ignore[arg-type]
        conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        while chunk := conn.recv(262144):
            chunks.append(chunk)
    return _answer(b"".join(chunks), url)


def _answer(data: bytes, url: str) -> Answer | None:
    top, sep, body = data.partition(b"\r\n\r\n")
    if not sep or len(top) > _HEAD_MAX:
        return None
    lines = top.decode("latin-1").split("\r\n")
    status = lines[0].split(" ", 2)
    if len(status) < 2 or status[0] not in ("HTTP/1.1", "HTTP/1.0") or not status[1].isdigit():
        return None
    fields: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon:
            return None
        fields[name.strip().lower()] = value.strip()
    content: bytes | None = body
    if fields.get("transfer-encoding", "").lower() == "chunked":
        content = _unchunked(body)
    elif "content-length" in fields and fields["content-length"] != str(len(body)):
        return None  # cut short
    if content is None or "content-encoding" in fields:
        return None
    return Answer(int(status[1]), fields, content, url, status[2] if len(status) > 2 else "")


def _unchunked(body: bytes) -> bytes | None:
    """A chunked body's bytes; ``None`` when it is cut short or malformed."""
    out: list[bytes] = []
    at = 0
    while True:
        end = body.find(b"\r\n", at)
        if end < 0:
            return None
        try:
            size = int(body[at:end].split(b";", 1)[0], 16)
        except ValueError:
            return None
        if size == 0:
            return b"".join(out)
        start = end + 2
        if body[start + size : start + size + 2] != b"\r\n":
            return None
        out.append(body[start : start + size])
        at = start + size + 2
