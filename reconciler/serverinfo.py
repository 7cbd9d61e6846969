"""What a running ``astra server`` leaves in its home for others to find it: the one format.

Owns: ``server.json`` (pid, host, port, URL: ``write_info`` when the server listens,
``read_info`` for whoever looks for it, ``forget_info`` when it stops), ``port`` (the port it
last listened on, kept across restarts: ``remember_port``/``read_port``), ``DEFAULT_PORT`` and
``ServerError`` (the server cannot start or be reached: one line of words).

It sits below both the control plane (which writes these files) and the CLI (which reads them to
find or start the local server), so that a client command imports nothing of the server: the
embedded control plane, its scheduler and its store cost a command that only talks to it a
tenth of a second of imports. Must not touch: anything of astra's; standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_PORT",
    "ServerError",
    "ServerInfo",
    "alive",
    "forget_info",
    "read_info",
    "read_port",
    "remember_port",
    "write_info",
]

#: The port a server listens on when none is given, and the local server's first choice.
DEFAULT_PORT = 8750


class ServerError(Exception):
    """The server cannot start or be reached; the message says why, in one line."""


@dataclass(frozen=True)
class ServerInfo:
    pid: int
    host: str
    port: int
    url: str

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "host": self.host, "port": self.port, "url": self.url}


def write_info(home: Path, info: ServerInfo) -> None:
    """Say in ``home`` that this server listens (``server.json``)."""
    (home / "server.json").write_text(json.dumps(info.to_json()) + "\n")


def forget_info(home: Path, pid: int) -> None:
    """Remove ``server.json`` if it still names the server ``pid`` (a later one may have written it)."""
    with contextlib.suppress(FileNotFoundError, ValueError):
        if json.loads((home / "server.json").read_text()).get("pid") == pid:
            (home / "server.json").unlink()


def read_info(home: Path) -> ServerInfo | None:
    """The running server of ``home`` (from ``server.json``), if its process is alive."""
    try:
        data = json.loads((home / "server.json").read_text())
        info = ServerInfo(int(data["pid"]), data["host"], int(data["port"]), data["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info if alive(info.pid) else None


def remember_port(home: Path, port: int) -> None:
    """Keep the port a server listens on for its next start (not needed to serve: errors ignored)."""
    with contextlib.suppress(OSError):
        (home / "port").write_text(f"{port}\n")


def read_port(home: Path) -> int:
    """The port the server of ``home`` last listened on (``HOME/port``), else ``DEFAULT_PORT``."""
    try:
        port = int((home / "port").read_text().strip())
    except (OSError, ValueError):
        return DEFAULT_PORT
    return port if 0 < port < 65536 else DEFAULT_PORT


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True
