"""Choosing a cluster for the CLI: ``connect(server, token)``.

``server`` (``--server`` / ``ASTRA_SERVER``):

* ``http://…`` or ``https://…``: an Astraeus API (``reconciler.clusters.http.HttpCluster``);
* ``slurm://[PARTITION]``: a Slurm cluster reached by the local Slurm commands
  (``reconciler.clusters.slurm``);
* nothing: the local control plane, started on demand
  (``reconciler.cli.local_server.ensure_server() -> (url, token)``); a command that only reads
  passes ``start=False`` and is told none runs instead.

Every command's GETs made before its first write go plain on a socket
(``HttpCluster(plain_gets=True)``, ``reconciler.plainhttp``), the same answers as through httpx,
without importing it (httpx and what it imports take 160 ms of a command's start, more than
half of a one-file ``astra plan`` with nothing to change, which makes only GETs); the first
write, and any GET after it or that the socket could not carry whole, goes through httpx.

This is the one place those meet; the commands call nothing else to get a cluster. It is the
CLI's (a library user makes the cluster they want): the clusters never import the control
plane. Each is imported when chosen, so a command pays only for the cluster it uses.
"""

from __future__ import annotations

import os

from ..clusters.base import Cluster, ClusterError

__all__ = ["connect", "require_host"]


def require_host(server: str) -> None:
    """``ClusterError`` when an http(s) URL names no host (``--server http://``)."""
    from urllib.parse import urlsplit

    try:
        host = urlsplit(server).hostname
    except ValueError:  # an unbalanced [ in the host
        host = None
    if not host:
        raise ClusterError(f"cannot use server '{server}': the URL names no host (http://HOST:PORT)")


def connect(server: str | None, token: str | None, *, start: bool = True) -> Cluster:
    """The cluster ``server`` names (see the module docstring); ``ClusterError`` when there is none
    (or, with ``start=False``, when no local server runs)."""
    server = server or os.environ.get("ASTRA_SERVER") or None
    token = token or os.environ.get("ASTRA_TOKEN") or None
    if server is None:
        from ..serverinfo import ServerError
        from .local_server import ensure_server

        try:
            server, token = ensure_server(start=start)
        except ServerError as exc:
            raise ClusterError(str(exc)) from exc
    if server.startswith(("http://", "https://")):
        from ..clusters.http import HttpCluster

        require_host(server)

        return HttpCluster(server, token, plain_gets=True)
    if server.startswith("slurm://"):
        try:
            from ..clusters.slurm import SlurmCluster
        except ImportError as exc:  # a platform without what it needs (fcntl)
            raise ClusterError(f"the Slurm cluster is not available: {exc}") from exc
        try:
            return SlurmCluster.from_url(server)
        except ValueError as exc:
            raise ClusterError(str(exc)) from exc
    raise ClusterError(f"cannot use server '{server}': give an http(s):// URL or slurm://[PARTITION]")
