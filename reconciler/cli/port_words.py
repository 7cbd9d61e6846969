"""Why the local server listens where it does: ``port 8750 is in use (by pid N): listening on 41185``.

The server takes any free port when the one it asks for is taken (``--any-port-if-busy``); a
person who reads only the URL would not know why it moved. ``moved_words`` says it, naming the
process that holds the port where the system lets us see it (psutil; the pid of another user's
process is hidden from us, and then only the port is said).

Must not touch: the server (it only reads the URL it answered at), the home's files.
"""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["holder_of", "moved_words"]


def holder_of(port: int) -> int | None:
    """The pid of the process listening on TCP ``port``, where it can be known."""
    try:
        import psutil

        for conn in psutil.net_connections("tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                return int(conn.pid)
    except (ImportError, OSError, RuntimeError):  # psutil absent, or /proc not readable
        return None
    return None


def moved_words(asked: int, url: str, holder: int | None = None) -> str | None:
    """``port A is in use (by pid N): listening on P`` when the server at ``url`` is not on port
    ``asked``; ``None`` when it is. ``holder``: the pid on ``asked``, when known."""
    port = urlsplit(url).port
    if port is None or port == asked:
        return None
    by = f" (by pid {holder})" if holder is not None else ""
    return f"port {asked} is in use{by}: listening on {port}"
