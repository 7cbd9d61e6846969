"""``SourcePaths``: a source's name in a request path, made one path segment before routing.

A source's name may hold '/' (a git remote and a folder: ``https://github.com/acme/runs.git//runs``).
astra sends it percent-encoded whole (``%2F`` for each '/'): one segment, never confused with a
sub-resource, whatever it ends with. Others may send it plain, and then a trailing ``/lock``,
``/runs``, ``/runs/RUN``, ``/status``, ``/hook`` or ``/history`` is read as the sub-resource.

The router matches decoded paths, where an encoded name is no longer one segment; this ASGI
middleware reads the raw path first and rewrites the decoded one so that the name is a single
segment, percent-encoded (``quote(name, safe="")``), followed by the sub-resource. The routes
declare ``/sources/{name}/…`` and decode the name once (``sources.source_name``).

Owns: that rewrite (``canonical_path``). Must not touch: anything else of a request.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote

__all__ = ["SUBRESOURCES", "SourcePaths", "canonical_path"]

SUBRESOURCES = frozenset({"lock", "runs", "status", "history", "hook", "suspend"})


def _known(sub: list[str]) -> bool:
    """Whether ``sub`` names a source's sub-resource: nothing, lock, runs, runs/RUN, status, history."""
    if not sub:
        return True
    if sub[0] == "runs" and len(sub) == 2:
        return sub[1] != ""
    return len(sub) == 1 and sub[0] in SUBRESOURCES


def _sources_at(parts: list[str]) -> int | None:
    """Where ``sources`` is in a path's segments under one of the API's base paths, if it is."""
    at = 10 if parts[1:4] == ["api", "v1", "orgs"] else 2
    if parts[1:2] == ["api"] and len(parts) > at + 1 and parts[at] == "sources" and parts[at + 1]:
        return at
    return None


def canonical_path(path: str, raw_path: bytes | None) -> str | None:
    """The path with a source's name as one encoded segment; ``None`` when it names no source.

    The raw path is read first: a name sent encoded whole is one segment there. When it is not
    (a name sent with plain '/'), the decoded path is split at a trailing sub-resource."""
    if raw_path is not None:
        parts = raw_path.decode("latin-1").split("?", 1)[0].split("/")
        at = _sources_at(parts)
        if at is not None and "" not in parts[at + 2 :]:
            sub = [unquote(p) for p in parts[at + 2 :]]
            if _known(sub):
                decoded = path.split("/")
                return _join(decoded[: at + 1], unquote(parts[at + 1]), sub)
    parts = path.split("/")
    at = _sources_at(parts)
    if at is None:
        return None
    rest = parts[at + 1 :]
    for n in (2, 1):
        if len(rest) > n and _known(rest[-n:]):
            return _join(parts[: at + 1], "/".join(rest[:-n]), rest[-n:])
    return _join(parts[: at + 1], "/".join(rest), [])


def _join(head: list[str], name: str, sub: list[str]) -> str:
    return "/".join([*head, quote(name, safe=""), *(quote(s, safe="") for s in sub)])


class SourcePaths:
    """The ASGI middleware that applies ``canonical_path`` to every HTTP request."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and "/sources/" in scope["path"]:
            path = canonical_path(scope["path"], scope.get("raw_path"))
            if path is not None:
                scope = {**scope, "path": path}
        await self.app(scope, receive, send)
