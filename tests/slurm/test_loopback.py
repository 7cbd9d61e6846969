"""The daemons the tests and scripts start listen on loopback only (issue 32; README: loopback).

Read from the system's own table of listening sockets (psutil, as ``ss -ltnp`` reads it): every
TCP socket that slurmctld, slurmd, PostgreSQL or Prometheus listens on is bound to a loopback
address, never to 0.0.0.0. Like the other Slurm tests, this fails (never skips) when one is not
up (``task slurm:up``, ``task postgres:up``, ``task prometheus:up``: ``task test`` starts them).
"""

from __future__ import annotations

import ipaddress

import psutil

DAEMONS = ("slurmctld", "slurmd", "postgres", "prometheus")


def listening() -> dict[str, set[str]]:
    """Each daemon of ``DAEMONS`` that listens, with the addresses it listens on."""
    found: dict[str, set[str]] = {}
    for conn in psutil.net_connections("tcp"):
        if conn.status != psutil.CONN_LISTEN or not conn.pid:
            continue
        try:
            name = psutil.Process(conn.pid).name()
        except psutil.Error:
            continue
        if name in DAEMONS:
            found.setdefault(name, set()).add(conn.laddr.ip)
    return found


def test_slurm_postgresql_and_prometheus_listen_on_loopback_only():
    found = listening()
    missing = set(DAEMONS) - set(found)
    assert not missing, f"not listening: {missing}; run task slurm:up, postgres:up, prometheus:up"
    wide = {
        name: sorted(a for a in addrs if not ipaddress.ip_address(a).is_loopback)
        for name, addrs in found.items()
    }
    assert wide == {name: [] for name in DAEMONS}, wide
