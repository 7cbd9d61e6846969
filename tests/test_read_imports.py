"""The reads typed all day import only what they use: no typer, pydantic or httpx (each a tenth
of a second or more of a command's start-up; issue 33), checked with ``python -X importtime`` on
a real process against a server on loopback that answers every listing with nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("typer", "pydantic", "httpx", "rich")
#: astra's own settings, and proxies (a proxy sends the reads through httpx, as it must)
UNSET = ("ASTRA_", "HTTP", "http", "ALL_", "all_")


class _Empty(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"items": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Empty)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.mark.parametrize(
    "argv",
    [("get", "runs"), ("get", "workers", "r"), ("status",), ("source", "list")],
    ids=" ".join,
)
def test_a_read_imports_no_typer_pydantic_or_httpx(server, tmp_path, argv):
    env = {k: v for k, v in os.environ.items() if not k.startswith(UNSET)}
    env |= {"ASTRA_HOME": str(tmp_path), "ASTRA_SERVER": server, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "reconciler.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert not sorted(m for m in imported if m.split(".")[0] in HEAVY)


def test_a_plan_with_nothing_to_change_imports_no_httpx(tmp_path):
    """``astra plan -f`` of an applied file makes only GETs: they go plain, httpx is not imported;
    the apply before it writes, through httpx. The plan's words are the same either way."""
    from tests.controlplane_api.conftest import LiveServer

    cwd = tmp_path / "work"
    (cwd / "runs").mkdir(parents=True)
    (cwd / "runs" / "a.yaml").write_text(
        "metadata: {name: a}\nspec:\n  task_template: {image: busybox, command: sleep, args: ['600']}\n"
    )
    live = LiveServer(tmp_path / "home", cwd).start()
    try:
        applied = live.astra("apply", "-f", "runs", "--yes")
        assert applied.returncode == 0, applied.stderr[-2000:]
        plain = [sys.executable, "-X", "importtime", "-m", "reconciler.cli", "plan", "-f", "runs"]
        done = subprocess.run(plain, cwd=cwd, env=live.env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "No changes: the cluster matches the files." in done.stdout
        imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
        assert not sorted(m for m in imported if m.split(".")[0] == "httpx")
    finally:
        live.stop()


def test_a_read_that_finds_the_local_server_running_imports_no_subprocess(tmp_path):
    """A read finds the local server by its home (no ``--server``): it starts no process, so it
    imports no ``subprocess`` (what starting the server needs), and prints the same either way."""
    from tests.controlplane_api.conftest import LiveServer

    live = LiveServer(tmp_path / "home", tmp_path).start()
    try:
        env = {k: v for k, v in live.env.items() if k != "ASTRA_SERVER"} | {"PYTHONPATH": str(ROOT)}
        argv = [sys.executable, "-X", "importtime", "-m", "reconciler.cli", "get", "runs"]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout == f"No runs on {live.url}.\n"
        imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
        assert "subprocess" not in imported
    finally:
        live.stop()
