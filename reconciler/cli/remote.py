"""Talking to an Astraeus API from the CLI: the server (embedded by default), its token, errors.

Thin: ``call(method, path, ...)`` finds the server with ``reconciler.cli.local_server.ensure_server``
(``--server``/``ASTRA_SERVER``, else the local control plane, started on demand), sends one
request, and turns any failure into ``CommandError``: one line for the user, exit 1.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CommandError", "call", "called"]


class CommandError(Exception):
    """A command failed; the message is the one line the user sees."""


def called(method: str, path: str, *, server: str | None, token: str | None, **kw: Any) -> Any:
    """``call``, with a failure said in its one line and the command ended (exit 1): what the
    write verbs (``alert``, ``secret``, ``drive``, the teams' commands) do with an answer."""
    import typer

    from .output import error

    try:
        return call(method, path, server=server, token=token, **kw)
    except CommandError as exc:
        error(str(exc))
        raise typer.Exit(1) from exc


def call(
    method: str,
    path: str,
    *,
    server: str | None,
    token: str | None,
    json: Any = None,
    start: bool = True,
    content: bytes | None = None,
):
    """One request to the API; ``start=False`` (a command that only reads): never start the local
    server, say that none runs instead; ``content``: a raw body (a secret's value) instead of JSON."""
    import httpx

    from ..clusters.base import ClusterError
    from ..serverinfo import ServerError
    from ..wire import api_base
    from .connect import require_host
    from .local_server import ensure_server

    try:
        url, tok = ensure_server(server, token, start=start)
    except ServerError as exc:
        raise CommandError(str(exc)) from exc
    if url.startswith("slurm://"):
        raise CommandError(f"{url} is a Slurm cluster: this command needs an Astraeus API (http://…)")
    try:
        require_host(url)
    except ClusterError as exc:
        raise CommandError(str(exc)) from exc
    headers = {"Authorization": f"Bearer {tok}"} if tok else {}
    try:
        if content is not None:
            headers["Content-Type"] = "application/octet-stream"
        response = httpx.request(
            method, api_base(url) + path, json=json, content=content, headers=headers, timeout=60.0
        )
    except httpx.HTTPError as exc:
        raise CommandError(f"cannot reach {url}: {exc}") from exc
    if response.status_code >= 400:
        raise CommandError(_problem(response))
    return response


def _problem(response) -> str:
    try:
        body = response.json()
    except ValueError:
        return f"the server answered {response.status_code}: {response.text.strip()[:200]}"
    if isinstance(body, list):  # 422: the validation messages
        return "; ".join(
            f"{p.get('path')}: {p.get('message')}" if p.get("path") else p.get("message", "") for p in body
        )
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])
    return f"the server answered {response.status_code}"
