"""Plain GETs on a socket (``reconciler.plainhttp``), as the read-ahead's forked process
makes them (``HttpCluster(plain_gets=True)``): the same answers as through httpx, without
importing it; anything they cannot read is asked again through httpx, which says what
is wrong."""

from __future__ import annotations

import socket
import threading

import pytest

from reconciler import plainhttp
from reconciler.clusters import http
from reconciler.clusters.base import ClusterError, Unreachable
from reconciler.clusters.http import HttpCluster

from .conftest import TOKEN, free_port

SPEC = (
    "metadata: {{name: {name}}}\n"
    "spec: {{task_template: {{image: x, time_limit_seconds: 60, command: 'true'}}}}\n"
)


def _reads(url: str, token: str, plain_gets: bool = False) -> tuple[list, dict]:
    """The run summaries and the inventory of source ``s``."""
    cluster = HttpCluster(url, token, plain_gets=plain_gets)
    try:
        return cluster.list_run_summaries(), cluster.source_store().inventory("s", specs=False)
    finally:
        cluster.close()


def test_plain_reads_answer_what_httpx_answers_without_importing_it(live, monkeypatch):
    folder = live.cwd / "runs"
    folder.mkdir()
    for i in range(3):
        (folder / f"r{i}.yaml").write_text(SPEC.format(name=f"r{i}"))
    applied = live.astra("apply", "-f", "runs", "--yes", "--source", "s")
    assert applied.returncode == 0, applied.stderr

    def refused():
        raise AssertionError("httpx was asked")

    # the runs ('true') go on from Running to Completed while they are read: a round whose
    # reads through httpx before and after the plain ones differ is read again (each of the
    # three runs moves at most twice, so a few rounds are enough)
    for _ in range(8):
        through_httpx = _reads(live.url, TOKEN)
        with monkeypatch.context() as plain_only:
            plain_only.setattr(http, "_httpx", refused)
            plain = _reads(live.url, TOKEN, plain_gets=True)
        if _reads(live.url, TOKEN) == through_httpx:
            break
    else:
        raise AssertionError("the runs never stood still for three reads")
    assert plain == through_httpx
    listed, inventory = plain
    assert [r.name for r in listed] == ["r0", "r1", "r2"] and sorted(inventory) == ["r0", "r1", "r2"]


def _no_httpx():
    raise AssertionError("httpx was asked")


def test_a_refusal_read_plainly_says_what_httpx_says(live, monkeypatch):
    said = {}
    for plain_gets in (False, True):
        with monkeypatch.context() as plain_only:
            if plain_gets:  # a refusal is an answer too: no httpx to say it
                plain_only.setattr(http, "_httpx", _no_httpx)
            with pytest.raises(ClusterError) as refused:
                HttpCluster(live.url, "not-the-token", plain_gets=plain_gets).list_run_summaries()
            with pytest.raises(ClusterError) as missing:
                HttpCluster(live.url, TOKEN, plain_gets=plain_gets).workers("nosuch")
        said[plain_gets] = [(type(e.value), str(e.value)) for e in (refused, missing)]
    assert said[True] == said[False]
    (_, words), (kind, _) = said[True]
    assert "401" in words and "give --token or ASTRA_TOKEN" in words and kind.__name__ == "NotFound"


def test_a_server_that_cannot_be_reached_plainly_is_asked_through_httpx():
    with pytest.raises(Unreachable, match="cannot be reached"):
        HttpCluster(f"http://127.0.0.1:{free_port()}", TOKEN, timeout=2, plain_gets=True).list_run_summaries()


def test_a_plain_read_that_times_out_is_unreachable_without_waiting_again(monkeypatch):
    listener = socket.create_server(("127.0.0.1", 0))  # it accepts, and never answers

    def refused():
        raise AssertionError("httpx was asked: it would wait as long again")

    monkeypatch.setattr(http, "_httpx", refused)
    with listener, pytest.raises(Unreachable, match="cannot be reached: timed out"):
        address = f"http://127.0.0.1:{listener.getsockname()[1]}"
        HttpCluster(address, TOKEN, timeout=0.3, plain_gets=True).list_run_summaries()


def _serve(answer: bytes) -> tuple[str, list[bytes]]:
    """A server on loopback that answers one request with ``answer`` and closes; what it was sent."""
    listener = socket.create_server(("127.0.0.1", 0))
    asked: list[bytes] = []

    def once():
        conn, _ = listener.accept()
        with conn, listener:
            got = b""
            while b"\r\n\r\n" not in got:
                got += conn.recv(4096)
            asked.append(got)
            conn.sendall(answer)

    threading.Thread(target=once, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}/api/runs?view=summary", asked


def test_an_answer_in_chunks_is_read_whole():
    url, asked = _serve(
        b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nETag: "7"\r\n'
        b"transfer-encoding: chunked\r\n\r\n"
        b'5\r\n{"ite\r\n'
        b'b;ext=1\r\nms": [1, 2]\r\n'
        b"1\r\n}\r\n"
        b"0\r\n\r\n"
    )
    answer = plainhttp.get(url, {"Authorization": "Bearer t"}, 5)
    assert answer is not None and answer.status_code == 200 and answer.is_success
    assert answer.json() == {"items": [1, 2]} and answer.headers["etag"] == '"7"'
    head = asked[0].decode()
    assert head.startswith("GET /api/runs?view=summary HTTP/1.1\r\n")
    assert "Authorization: Bearer t\r\n" in head and "Connection: close\r\n" in head


@pytest.mark.parametrize(
    "answer",
    [
        b'HTTP/1.1 200 OK\r\ncontent-length: 20\r\n\r\n{"items": []}',  # cut short
        b'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{"ite',  # cut short, in chunks
        b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: 2\r\n\r\n{}",  # not asked for
        b"SSH-2.0-OpenSSH_9.2\r\n\r\n",  # no HTTP server
        b"",  # closed at once
    ],
    ids=["cut-short", "chunks-cut-short", "encoded", "not-http", "closed"],
)
def test_an_answer_that_cannot_be_read_is_none(answer):
    url, _ = _serve(answer)
    assert plainhttp.get(url, {}, 5) is None


def test_a_proxy_or_a_user_or_tls_is_not_read_plainly(monkeypatch):
    for key in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(key, raising=False)
    assert plainhttp.plain("http://127.0.0.1:8080/api/runs")
    assert not plainhttp.plain("https://example.org/api/runs")
    assert not plainhttp.plain("http://me:secret@example.org/api/runs")
    assert not plainhttp.plain("http://bücher.example/api/runs")  # httpx encodes its name
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")
    assert not plainhttp.plain("http://127.0.0.1:8080/api/runs")
