"""The day-2 commands as a user runs them (in-process), on the fake cluster, at a fixed clock.

``cli(*argv) -> (code, stdout, stderr)``; ``world`` is the plan tests' world (files under
``runs/``, a ``FakeCluster``); ``day2.clock`` reads the world's clock and ``day2.sleep`` moves it
on (and runs the next of ``later``, what happens on the cluster meanwhile; none left: the user
presses Ctrl-C): nothing sleeps.
"""

from __future__ import annotations

import io

import pytest
import stamina

from reconciler.cli.app import run
from tests.plan.conftest import World


@pytest.fixture(autouse=True)
def _no_retry_waits():
    stamina.set_testing(True, attempts=3)
    yield
    stamina.set_testing(False)


@pytest.fixture
def later() -> list:
    return []


@pytest.fixture
def world(tmp_path, monkeypatch, later) -> World:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ASTRA_HOME", str(tmp_path / ".astra"))
    monkeypatch.delenv("ASTRA_TEMPLATE_PATH", raising=False)
    monkeypatch.delenv("ASTRA_SERVER", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    w = World(tmp_path)

    def sleep(seconds: float) -> None:
        w.now += seconds
        if later:
            later.pop(0)()
        else:
            raise KeyboardInterrupt  # nothing more will happen: the user stops watching

    monkeypatch.setattr("reconciler.cli.day2.clock", lambda: w.now)
    monkeypatch.setattr("reconciler.cli.day2.sleep", sleep)
    return w


@pytest.fixture
def cli(world, monkeypatch, capsys):
    monkeypatch.setattr("reconciler.cli.connect.connect", lambda server, token, **_: world.cluster)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # no terminal

    def call(*argv: str) -> tuple[int, str, str]:
        code = run(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return call
