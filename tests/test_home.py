"""astra's local home: one rule (``reconciler.home``), absolute, read by every part that needs it."""

from __future__ import annotations

from reconciler.cli import local_server
from reconciler.controlplane import server
from reconciler.home import astra_home
from reconciler.state import default_state_url, open_store


def test_the_home_is_astra_home_else_dot_astra_of_the_working_folder_always_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert astra_home({}) == tmp_path.resolve() / ".astra"
    assert astra_home({"ASTRA_HOME": "elsewhere"}) == tmp_path.resolve() / "elsewhere"
    assert astra_home({"ASTRA_HOME": str(tmp_path / "h")}) == (tmp_path / "h").resolve()
    monkeypatch.setenv("ASTRA_HOME", "from-env")
    assert astra_home() == tmp_path.resolve() / "from-env"


def test_the_state_file_and_the_local_server_use_the_same_home(tmp_path, monkeypatch):
    """They used to disagree: the state's home was relative, the server's resolved."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ASTRA_HOME", raising=False)
    home = tmp_path.resolve() / ".astra"
    assert default_state_url() == f"sqlite:///{home / 'state.db'}"
    assert open_store(None, object()).address == f"sqlite:///{home / 'state.db'}"
    assert server.astra_home is astra_home and local_server.astra_home is astra_home
