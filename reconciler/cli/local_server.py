"""The CLI's default cluster: find the Astraeus API to talk to, starting a local one if needed.

Owns: ``ensure_server(server, token, start=…) -> (url, token)``. With ``--server``/``ASTRA_SERVER``
that server is used (and ``--token``/``ASTRA_TOKEN``). Without, the local control plane of
astra's home (``reconciler.home.astra_home``: ``$ASTRA_HOME``, else the nearest ``.astra/``
upward, else the per-user home) is used: reused when its ``server.json`` names a live process
that answers; else, for a command that writes (``start=True``), ``astra server`` is started in
the background (its own session, output to ``HOME/server.log``) on the port it used last
(8750 the first time; any free port when that one is taken) and waited for, and the command says
so on stderr, once: where, which URL, how to stop it. A command that only reads
(``start=False``) never starts one: ``NoServer`` says none runs and how to start one.

One server per home, whoever asks at once: the check and the start happen under
``HOME/server.lock`` (``reconciler.home.home_lock``), so three commands started together share
one server; the server itself holds ``HOME/serving.lock`` while it runs.

It lives with the CLI (it starts a process, ``astra server``, and waits for it: a command's
business); the control plane only writes its ``server.json`` (``controlplane.server``), and the
clusters never start one.

Must not touch: the server's internals (it only starts the process and reads ``server.json``).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ..home import HomeError, astra_home, home_lock
from ..serverinfo import ServerError, read_info, read_port

__all__ = ["NoServer", "ensure_server", "local_server", "start_local_server"]

#: How long a freshly started server may take to answer.
START_TIMEOUT = 60.0
#: How long a command waits for another one that is starting the server of the same home.
LOCK_TIMEOUT = START_TIMEOUT + 15.0


class NoServer(ServerError):
    """No local server runs, and the command only reads: it does not start one."""


def _healthy(url: str) -> bool:
    """Whether the server at ``url`` answers ``/healthz``: a plain GET on a socket
    (``reconciler.plainhttp``: a command that only reads imports no httpx), through httpx when
    the URL is not plain (a proxy in the environment, say)."""
    from .. import plainhttp

    health = url.rstrip("/") + "/healthz"
    if plainhttp.plain(health):
        try:
            answer = plainhttp.get(health, {}, 2.0)
        except OSError:  # refused, or no answer in time (TimeoutError is one)
            return False
        if answer is not None:
            return answer.status_code == 200
    import httpx

    try:
        return httpx.get(health, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def _token(home: Path, given: str | None) -> str | None:
    if given:
        return given
    if os.environ.get("ASTRA_TOKEN"):
        return os.environ["ASTRA_TOKEN"]
    try:
        return (home / "token").read_text().strip() or None
    except OSError:
        return None


def ensure_server(
    server: str | None = None, token: str | None = None, *, start: bool = True
) -> tuple[str, str | None]:
    """The server to talk to and its token; starts the local one when none is given or running
    (unless ``start`` is false: then ``NoServer``)."""
    server = server or os.environ.get("ASTRA_SERVER")
    home = astra_home()
    if server:
        return server, _token(home, token)
    url = local_server(home)
    if url is None:
        if not start:
            raise NoServer(
                f"no astra server runs for {home}: 'astra server start' starts one in the background "
                "(so does any 'astra apply' or 'astra plan')"
            )
        url, _ = start_local_server(home)
    return url, _token(home, token)


def local_server(home: Path) -> str | None:
    """The URL of the server running for ``home``, if one runs and answers."""
    info = read_info(home)
    return info.url if info is not None and _healthy(info.url) else None


def start_local_server(home: Path, *, announce: bool = True) -> tuple[str, bool]:
    """The URL of the server of ``home``, started now if none runs; whether this call started it.

    Under the home's start lock; says so on stderr when it starts one (unless ``announce`` is
    false: the caller says it)."""
    try:
        with home_lock(home, "server", timeout=LOCK_TIMEOUT, purpose="start the local astra server"):
            url = local_server(home)
            if url is not None:
                return url, False
            url = _start(home)
    except HomeError as exc:
        raise ServerError(str(exc)) from exc
    if announce:
        sys.stderr.write(started_words(home, url) + "\n")
    return url, True


def started_words(home: Path, url: str) -> str:
    """What a command says when it started the local server: where, which URL, how to stop it."""
    return (
        f"astra: started the local astra server at {url} (home {home}, log {home / 'server.log'}); "
        "'astra server stop' stops it"
    )


def _start(home: Path) -> str:
    import subprocess  # here: a command that finds the server running starts no process (5 ms)

    env = {**os.environ, "ASTRA_HOME": str(home)}
    port = str(read_port(home))
    # -P: this astra's server, never the code of a checkout in the working folder (-m puts it first)
    command = [sys.executable, "-P", "-m", "reconciler.cli", "server", "--host", "127.0.0.1", "--port", port]
    with open(home / "server.log", "ab") as out:
        proc = subprocess.Popen(
            [*command, "--any-port-if-busy"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            tail = _tail(home / "server.log")
            raise ServerError(f"the local astra server exited with code {code}: {tail}")
        info = read_info(home)
        if info is not None and info.pid == proc.pid and _healthy(info.url):
            return info.url
        time.sleep(0.05)
    raise ServerError(
        f"the local astra server did not answer within {START_TIMEOUT:g} s (see {home / 'server.log'})"
    )


def _tail(path: Path) -> str:
    try:
        lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return "no output"
    return lines[-1] if lines else "no output"
