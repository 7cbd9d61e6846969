"""A newcomer at a shell: a fresh ``HOME``, no ``ASTRA_*`` variables, astra on the ``PATH``.

``user.astra(...)`` runs the ``astra`` command and ``user.sh(...)`` a shell snippet as printed;
every local server they started (in the per-user home or a project's ``.astra/``) is stopped
at the end. Nothing here sleeps: waits poll with a deadline.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


class User:
    def __init__(self, tmp: Path) -> None:
        self.home = tmp / "home"
        self.home.mkdir()
        self.state = self.home / ".local" / "state" / "astra"  # the per-user home
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("ASTRA_", "XDG_"))}
        self.env = {**keep, "HOME": str(self.home), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        self.homes: set[Path] = {self.state}

    def astra(self, *args: str, cwd: Path, **kw) -> subprocess.CompletedProcess:
        command = [str(BIN / "astra"), *args]
        return subprocess.run(
            command, cwd=cwd, env=self.env, capture_output=True, text=True, timeout=180, **kw
        )

    def sh(self, script: str, cwd: Path) -> subprocess.CompletedProcess:
        """``script`` run by bash as a user would paste it (``set -e``: the first failure ends it)."""
        return subprocess.run(
            ["bash", "-ec", script], cwd=cwd, env=self.env, capture_output=True, text=True, timeout=300
        )

    def stop_servers(self) -> None:
        from reconciler.controlplane.server import stop_server

        for home in self.homes:
            stop_server(home)


@pytest.fixture
def user(tmp_path):
    u = User(tmp_path)
    yield u
    u.stop_servers()


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@x"
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def snapshot_of_this_checkout(into: Path) -> str:
    """This work tree as it is (tracked and new files, not ignored ones), committed in a repo of
    its own at ``into``: a clone a newcomer would make, or a hook repo for pre-commit."""
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT)
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    git("init", "-q", cwd=into)
    git("add", "-A", cwd=into)
    git("commit", "-q", "-m", "snapshot", cwd=into)
    return git("rev-parse", "HEAD", cwd=into)
