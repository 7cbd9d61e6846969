"""Choosing a cluster for the CLI: ``connect(server, token)``.

``server`` (``--server`` / ``ASTRA_SERVER``):

* ``http://…`` or ``https://…``: an Astraeus API (``reconciler.clusters.http.HttpCluster``);
* ``slurm://[PARTITION]``: a Slurm cluster reached by the local Slurm commands
  (``reconciler.clusters.slurm``);
* nothing: the local control plane, started on demand
  (``reconciler.cli.local_server.ensure_server() -> (url, token)``).

This is the one place those meet; the commands call nothing else to get a cluster. It is the
CLI's (a library user makes the cluster they want): the clusters never import the control
plane. Each is imported when chosen, so a command pays only for the cluster it uses.
"""

from __future__ import annotations

import os

from ..clusters.base import Cluster, ClusterError

__all__ = ["connect"]


def connect(server: str | None, token: str | None) -> Cluster:
    """The cluster ``server`` names (see the module docstring); ``ClusterError`` when there is none."""
    server = server or os.environ.get("ASTRA_SERVER") or None
    token = token or os.environ.get("ASTRA_TOKEN") or None
    if server is None:
        from .local_server import ensure_server

        server, token = ensure_server()
    if server.startswith(("http://", "https://")):
        from ..clusters.http import HttpCluster

        return HttpCluster(server, token)
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
