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


@pytest.fixture
def deep_folders():
    """``make(top, name, levels, file, text)`` makes ``top/name/name/…/file`` (``levels``
    folders), one level at a time (``os.makedirs`` and ``Path.mkdir(parents=True)`` recurse once
    a level), and gives its path; each chain is removed at teardown the same way (``rmtree``
    recurses too, and pytest's clean-up of ``tmp_path`` would fail on it)."""
    import os

    made: list[tuple[Path, str, int]] = []

    def make(top: Path, name: str, levels: int, file: str, text: str) -> str:
        made.append((top, name, levels))
        fd = os.open(top, os.O_RDONLY)
        try:
            for _ in range(levels):
                os.mkdir(name, dir_fd=fd)
                inner = os.open(name, os.O_RDONLY, dir_fd=fd)
                os.close(fd)
                fd = inner
            with open(os.open(file, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
                f.write(text)
        finally:
            os.close(fd)
        return os.path.join(str(top), *[name] * levels, file)

    yield make
    for top, name, levels in made:
        fds = [os.open(top, os.O_RDONLY)]
        try:
            for _ in range(levels):
                fds.append(os.open(name, os.O_RDONLY, dir_fd=fds[-1]))
            for entry in os.listdir(fds[-1]):
                os.unlink(entry, dir_fd=fds[-1])
            for _ in range(levels):
                os.close(fds.pop())
                os.rmdir(name, dir_fd=fds[-1])
        finally:
            for fd in fds:
                os.close(fd)
