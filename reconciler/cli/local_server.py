"""The CLI's default cluster: find the Astraeus API to talk to, starting a local one if needed.

Owns: ``ensure_server() -> (url, token)``. With ``--server``/``ASTRA_SERVER`` that server is used
(and ``--token``/``ASTRA_TOKEN``). Without, the local control plane of the current folder (or of
``$ASTRA_HOME``) is used: reused when its ``server.json`` names a live process that answers,
else ``astra server --port 0`` is started in the background (its own session, output to
``HOME/server.log``) and waited for. Later commands find it the same way; ``astra server stop``
ends it.

It lives with the CLI (it starts a process, ``astra server``, and waits for it: a command's
business); the control plane only writes its ``server.json`` (``controlplane.server``), and the
clusters never start one.

Must not touch: the server's internals (it only starts the process and reads ``server.json``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from ..controlplane.server import ServerError, read_info
from ..home import astra_home

__all__ = ["ensure_server"]

#: How long a freshly started server may take to answer.
START_TIMEOUT = 60.0


def _healthy(url: str) -> bool:
    from ..clusters.httpx_lean import httpx

    try:
        return httpx.get(url.rstrip("/") + "/healthz", timeout=2.0).status_code == 200
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


def ensure_server(server: str | None = None, token: str | None = None) -> tuple[str, str | None]:
    """The server to talk to and its token; starts the local one when none is given or running."""
    server = server or os.environ.get("ASTRA_SERVER")
    home = astra_home()
    if server:
        return server, _token(home, token)
    info = read_info(home)
    if info is not None and _healthy(info.url):
        return info.url, _token(home, token)
    return _start(home), _token(home, token)


def _start(home: Path) -> str:
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "ASTRA_HOME": str(home)}
    with open(home / "server.log", "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "reconciler.cli", "server", "--host", "127.0.0.1", "--port", "0"],
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
