"""``astra logs --since`` as a user runs it against the local control plane (in-process: real
processes, their lines marked at a simulated clock, the API through ``HttpCluster``), and in one
line where a cluster keeps no times."""

from __future__ import annotations

import io

import httpx
import pytest

from reconciler.cli.app import run
from reconciler.clusters.http import HttpCluster
from tests.controlplane_api.conftest import TOKEN, Client, Plane
from tests.controlplane_api.test_log_times import T0, Talker


@pytest.fixture
def local(tmp_path, monkeypatch, capsys):
    """``(plane, cli)``: ``cli(*argv) -> (code, stdout, stderr)`` talks to ``plane``'s API; the
    CLI's clock is the plane's; ``sleeps`` (what ``-f`` does between reads) run in turn."""
    plane = Plane(tmp_path / "home")
    plane.home.mkdir(exist_ok=True)
    client = Client(plane)

    def forward(req: httpx.Request) -> httpx.Response:
        got = client.request(
            req.method, req.url.raw_path.decode(), headers=dict(req.headers), content=req.content, token=None
        )
        return httpx.Response(got.status_code, headers=got.headers, content=got.content)

    cluster = HttpCluster("http://astra.test", TOKEN, transport=httpx.MockTransport(forward))
    monkeypatch.setattr("reconciler.cli.connect.connect", lambda server, token, **_: cluster)
    monkeypatch.setattr("reconciler.cli.day2.clock", plane.clock.now)
    sleeps: list = []
    monkeypatch.setattr("reconciler.cli.day2.sleep", lambda _s: sleeps.pop(0)() if sleeps else None)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.chdir(tmp_path)

    def cli(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = run(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    yield plane, cli, sleeps
    plane.close()


def test_since_a_duration_or_a_time_and_with_tail(local):
    plane, cli, _ = local
    talk = Talker(plane)
    for i, at in enumerate((T0, T0 + 60, T0 + 120), start=1):  # line I at T0 + 60 (I - 1)
        talk.says(i, at)
    plane.clock.set(T0 + 150)

    assert cli("logs", "talk") == (0, "line 1\nline 2\nline 3\n", "")  # as ever without --since
    assert cli("logs", "talk", "--since", "90s") == (0, "line 2\nline 3\n", "")
    assert cli("logs", "talk-0", "--since", "1m") == (0, "line 3\n", "")
    assert cli("logs", "talk", "--since", "10s") == (0, "", "")
    assert cli("logs", "talk", "--since", "1h") == (0, "line 1\nline 2\nline 3\n", "")
    assert cli("logs", "talk", "--since", "2024-05-01T12:01:00Z") == (0, "line 2\nline 3\n", "")
    assert cli("logs", "talk", "--since", "2024-05-01T14:01:30+02:00") == (0, "line 3\n", "")
    assert cli("logs", "talk", "--since", "3m", "--tail", "2") == (0, "line 2\nline 3\n", "")
    assert cli("logs", "talk", "--since", "90s", "--tail", "1") == (0, "line 3\n", "")
    assert cli("logs", "talk", "--all", "--since", "90s") == (0, "talk-0 | line 2\ntalk-0 | line 3\n", "")
    assert cli("logs", "talk", "-f", "--since", "90s") == (0, "line 2\nline 3\n", "")  # it had ended


def test_follow_since_prints_from_then_on_and_what_comes(local):
    plane, cli, sleeps = local
    talk = Talker(plane)
    talk.says(1, T0)
    talk.says(2, T0 + 60)
    plane.clock.set(T0 + 70)
    sleeps.append(lambda: talk.says(3, T0 + 80))  # while -f waits: line 3, and the worker ends
    assert cli("logs", "talk", "-f", "--since", "30s") == (0, "line 2\nline 3\n", "")
    assert not sleeps


@pytest.mark.parametrize("bad", ["yesterday", "90", "-5m", "2024-13-01T00:00:00Z"])
def test_a_since_that_is_neither_is_one_line(world, cli, bad, snapshot):
    code, out, err = cli("logs", "talk", "--since", bad)
    assert (code, out) == (1, "")
    assert err == snapshot


def test_a_cluster_that_keeps_no_times_says_so_in_one_line(world, cli):
    world.cluster.create_run({"metadata": {"name": "job"}, "spec": {"task_template": {"image": "x"}}})
    world.cluster.start("job", workers=1)
    assert cli("logs", "job-0", "--since", "10m") == (
        1,
        "",
        "astra: error: fake://test does not record when each line of output was written: "
        "leave out --since (--tail N shows the last lines)\n",
    )
