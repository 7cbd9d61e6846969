"""astra's local home: one rule (``reconciler.home``), absolute, read by every part that needs it;
its locks say who holds them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.cli import local_server
from reconciler.controlplane import server
from reconciler.home import HomeError, astra_home, ensure_home, home_lock, home_origin
from reconciler.state import default_state_url, open_store


def test_astra_home_wins_then_the_nearest_dot_astra_upward_then_the_per_user_home(tmp_path, monkeypatch):
    deep = tmp_path / "project" / "runs" / "team"
    deep.mkdir(parents=True)
    per_user = {"HOME": str(tmp_path / "u")}
    assert astra_home(per_user, deep) == tmp_path / "u" / ".local" / "state" / "astra"
    assert home_origin(per_user, deep) == "per user"
    xdg = {**per_user, "XDG_STATE_HOME": str(tmp_path / "xdg")}
    assert astra_home(xdg, deep) == tmp_path / "xdg" / "astra"
    relative_xdg = {**per_user, "XDG_STATE_HOME": "rel"}  # the XDG spec: a relative value is ignored
    assert astra_home(relative_xdg, deep) == tmp_path / "u" / ".local" / "state" / "astra"
    (tmp_path / "project" / ".astra").mkdir()
    assert astra_home(xdg, deep) == tmp_path / "project" / ".astra"  # as git finds .git
    assert home_origin(xdg, deep) == "found upward"
    (deep / ".astra").mkdir()
    assert astra_home(xdg, deep) == deep / ".astra"  # the nearest
    (tmp_path / "u" / ".astra").mkdir(parents=True)  # the user's own ~/.astra is no project's
    assert astra_home(xdg, tmp_path / "u") == tmp_path / "xdg" / "astra"
    explicit = {**xdg, "ASTRA_HOME": str(tmp_path / "h")}
    assert astra_home(explicit, deep) == tmp_path / "h"  # an explicit choice wins over a find
    monkeypatch.chdir(deep)
    assert astra_home({"ASTRA_HOME": "elsewhere"}) == deep / "elsewhere"  # always absolute
    monkeypatch.delenv("ASTRA_HOME", raising=False)
    assert astra_home() == deep / ".astra"


def test_the_state_file_and_the_local_server_use_the_same_home(tmp_path, monkeypatch):
    """They used to disagree: the state's home was relative, the server's resolved."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ASTRA_HOME", raising=False)
    (tmp_path / ".astra").mkdir()
    home = tmp_path.resolve() / ".astra"
    assert default_state_url() == f"sqlite:///{home / 'state.db'}"
    assert open_store(None, object()).address == f"sqlite:///{home / 'state.db'}"
    assert server.astra_home is astra_home and local_server.astra_home is astra_home


def test_a_home_that_cannot_be_made_is_said_in_words():
    with pytest.raises(HomeError) as caught:
        ensure_home(Path("/proc/nope"))
    assert str(caught.value).startswith("cannot use /proc/nope as astra's home: No such file or directory")


def test_a_lock_held_elsewhere_times_out_naming_its_holder(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from reconciler.home import home_lock\n"
            f"with home_lock(Path({str(tmp_path)!r}), 'server', timeout=5, purpose='hold'):\n"
            "    print('held', flush=True); sys.stdin.read()",
            "plan",
            "-f",
            ".",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        lock = home_lock(tmp_path, "server", timeout=0.2, purpose="start it")
        with pytest.raises(HomeError) as caught, lock:
            pass
        text = str(caught.value)
        assert text.startswith(f"cannot start it: {tmp_path / 'server.lock'} is held by pid {holder.pid} (")
        assert "'astra plan -f .', since " in text and text.endswith("(waited 0.2 s)")
    finally:
        holder.communicate("")
    with home_lock(tmp_path, "server", timeout=0.2, purpose="start it"):  # released with its holder
        pass
