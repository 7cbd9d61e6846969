"""Real git repositories for the sources' tests: a working tree, a bare remote on the local disk,
and the same remote served over HTTP on loopback by ``git http-backend`` (a small CGI server in
a thread). Commits are made with the git CLI; nothing sleeps."""

from __future__ import annotations

import os
import subprocess
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

RUN = """\
metadata:
  name: {name}
spec:
  task_template:
    image: {image}
    command: python
    args: [train.py]
"""

ENV = {
    "GIT_AUTHOR_NAME": "Ada Lovelace",
    "GIT_AUTHOR_EMAIL": "ada@example.com",
    "GIT_COMMITTER_NAME": "Ada Lovelace",
    "GIT_COMMITTER_EMAIL": "ada@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


class Repo:
    """A working tree under ``root/work`` (branch main) with a bare remote ``root/remote.git``."""

    def __init__(self, root: Path):
        self.root = root
        self.work = root / "work"
        self.bare = root / "remote.git"
        self.work.mkdir()
        self.git("init", "-q", "-b", "main")
        self.git("config", "gc.auto", "0")
        self.git("init", "-q", "--bare", str(self.bare), cwd=root)
        self.git("config", "gc.auto", "0", cwd=self.bare)
        self.git("remote", "add", "origin", str(self.bare))

    def git(self, *args: str, cwd: Path | None = None) -> str:
        env = {**os.environ, **ENV}
        done = subprocess.run(
            ["git", *args], cwd=cwd or self.work, env=env, capture_output=True, text=True, check=True
        )
        return done.stdout.strip()

    def write(self, name: str, text: str) -> Path:
        path = self.work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    def run(self, name: str, image: str = "python:3.12", folder: str = "runs") -> Path:
        return self.write(f"{folder}/{name}.yaml", RUN.format(name=name, image=image))

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    def push(self, *, force: bool = False) -> None:
        self.git("push", "-q", *(["--force"] if force else []), "origin", "main")

    @property
    def url(self) -> str:
        return f"file://{self.bare}"


@pytest.fixture
def repo(tmp_path, monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    for k in ("CI", "GITHUB_REF_NAME", "GITHUB_HEAD_REF", "CI_COMMIT_REF_NAME"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("ASTRA_HOME", str(tmp_path / "home"))
    return Repo(tmp_path)


class _Cgi(BaseHTTPRequestHandler):
    """``git http-backend`` behind a minimal CGI bridge (smart HTTP, read only)."""

    root: Path

    def _serve(self) -> None:
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        env = {
            **os.environ,
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("content-type", ""),
            "CONTENT_LENGTH": str(length),
            "REMOTE_ADDR": "127.0.0.1",
        }
        if self.headers.get("content-encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["content-encoding"]
        if self.headers.get("git-protocol"):
            env["HTTP_GIT_PROTOCOL"] = self.headers["git-protocol"]
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.decode("latin-1").split("\r\n"):
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.strip().split()[0])
            elif key:
                headers.append((key, value.strip()))
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _serve

    def log_message(self, *args) -> None:  # quiet
        return


@pytest.fixture
def served(repo):
    """The bare remote served over HTTP on loopback: its URL (``http://127.0.0.1:PORT/remote.git``)."""
    handler = type("Handler", (_Cgi,), {"root": repo.root})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/remote.git"
    server.shutdown()
    server.server_close()
