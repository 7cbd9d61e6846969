"""Choosing a cluster for the CLI: ``connect(server, token)``.

``server`` (``--server`` / ``ASTRA_SERVER``):

* ``http://…`` or ``https://…``: an Astraeus API (``HttpCluster``);
* ``slurm://[PARTITION]``: a Slurm cluster reached by the local Slurm commands
  (``reconciler.clusters.slurm``);
* nothing: the embedded local control plane, started on demand
  (``reconciler.controlplane.embedded.ensure_server() -> (url, token)``).

This is the one place those hooks meet; the commands call nothing else to get a cluster.
"""

from __future__ import annotations

import importlib
import os

from .base import Cluster, ClusterError

__all__ = ["NO_CLUSTER", "connect"]

NO_CLUSTER = "no cluster: give --server or ASTRA_SERVER"


def connect(server: str | None, token: str | None) -> Cluster:
    """The cluster ``server`` names (see the module docstring); ``ClusterError`` when there is none."""
    server = server or os.environ.get("ASTRA_SERVER") or None
    token = token or os.environ.get("ASTRA_TOKEN") or None
    if server is None:
        try:
            embedded = importlib.import_module("reconciler.controlplane.embedded")
        except ImportError as exc:
            raise ClusterError(NO_CLUSTER) from exc
        server, token = embedded.ensure_server()
    if server.startswith(("http://", "https://")):
        from .http import HttpCluster

        return HttpCluster(server, token)
    if server.startswith("slurm://"):
        try:
            slurm = importlib.import_module("reconciler.clusters.slurm")
        except ImportError as exc:
            raise ClusterError(f"the Slurm cluster is not available: {exc}") from exc
        try:
            return slurm.SlurmCluster.from_url(server)  # type: ignore[no-any-return]
        except ValueError as exc:
            raise ClusterError(str(exc)) from exc
    raise ClusterError(f"cannot use server '{server}': give an http(s):// URL or slurm://[PARTITION]")
