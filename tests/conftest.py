from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def root() -> Path:
    return ROOT


# A property holds or not whatever the machine's load: no per-example time limit (the suite
# runs beside other work on two cores, where hypothesis' default 200 ms deadline is noise).
settings.register_profile("astra", deadline=None)
settings.load_profile("astra")


@pytest.fixture(autouse=True)
def _own_per_user_home(tmp_path_factory, monkeypatch):
    """No test reaches the real per-user home (``~/.local/state/astra``): where no ``ASTRA_HOME``
    is set and no ``.astra/`` is found upward, astra's home is a fresh folder of the test's own."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))
