"""A real Prometheus (Debian's, started by ``scripts/prometheus-local-up.sh``, as ``task test``
does) scraping a real ``astra server``, both on loopback, for the module's tests.

The config is the shipped one (``docs/prometheus/prometheus.yml``) with the test server as its
target and a scrape every second. Fails (never skips) when Prometheus is not installed: the
script installs it (as root; ``task prometheus:up``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from controlplane_api.conftest import TOKEN, LiveServer, free_port

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "docs" / "prometheus"
UP, DOWN = ROOT / "scripts" / "prometheus-local-up.sh", ROOT / "scripts" / "prometheus-local-down.sh"


def templated(target: str) -> str:
    """The shipped config, scraping ``target`` every second."""
    text = (SHIPPED / "prometheus.yml").read_text()
    for old, new in (
        ("scrape_interval: 15s", "scrape_interval: 1s"),
        ("evaluation_interval: 15s", "evaluation_interval: 1s"),
        ('"127.0.0.1:8750"', f'"{target}"'),
    ):
        assert old in text, f"the shipped config no longer says {old}"
        text = text.replace(old, new)
    return text


class Prometheus:
    """A Prometheus the project's script started: its URL, and PromQL asked through its HTTP API."""

    def __init__(self, url: str, folder: Path) -> None:
        self.url, self.folder = url, folder

    def query(self, promql: str) -> dict:
        r = httpx.get(self.url + "/api/v1/query", params={"query": promql}, timeout=10)
        body = r.json()
        assert body["status"] == "success", (promql, body)
        return body["data"]

    def value(self, promql: str) -> float | None:
        """The one value of an instant vector, or None while it has none."""
        result = self.query(promql)["result"]
        return float(result[0]["value"][1]) if result else None


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    """(the live astra server, the Prometheus scraping it)."""
    if shutil.which("prometheus") is None:
        pytest.fail("Prometheus is not installed: run `task prometheus:up` (as root)", pytrace=False)
    base = tmp_path_factory.mktemp("prometheus")
    (base / "work").mkdir()
    server = LiveServer(base / "home", base / "work").start()
    conf = base / "conf"
    conf.mkdir()
    (conf / "prometheus.yml").write_text(templated(f"127.0.0.1:{server.port}"))
    shutil.copy(SHIPPED / "alerts.yml", conf / "alerts.yml")
    env = {
        **os.environ,
        "PROMETHEUS_LOCAL_CONFIG": str(conf / "prometheus.yml"),
        "PROMETHEUS_LOCAL_PORT": str(free_port()),
        "PROMETHEUS_LOCAL_DIR": str(base / "run"),
        "ASTRA_TOKEN": TOKEN,
    }
    try:
        up = subprocess.run(["bash", str(UP)], env=env, capture_output=True, text=True, timeout=120)
        assert up.returncode == 0, up.stderr
        yield server, Prometheus(up.stdout.strip(), base / "run")
    finally:
        subprocess.run(["bash", str(DOWN)], env=env, capture_output=True, timeout=60)
        server.stop()
