"""When each line of a worker's log was written: the executor marks its logs at the control plane's
clock (simulated here: a worker prints a line when the test says, and the clock is where the test
puts it), and ``GET /workers/{worker}/logs?since=T`` sends the lines written at T or later."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconciler.controlplane.logtimes import LogMarks, since_offset, times_path

from .conftest import Client, Plane, until
from .test_api import tiny

#: 2024-05-01T12:00:00Z
T0 = 1_714_564_800.0
#: Prints ``line I`` once the file ``goI`` exists in its folder (the server's home), for I = 1, 2, 3.
TALKS = "for i in 1 2 3; do until [ -e go$i ]; do sleep 0.01; done; echo line $i; done"


class Talker:
    """Run ``name`` (one worker, ``TALKS``) on ``plane``, started at ``T0 - 10``."""

    def __init__(self, plane: Plane, name: str = "talk") -> None:
        self.plane, self.name, self.worker = plane, name, f"{name}-0"
        plane.clock.set(T0 - 10)
        plane.engine.submit(tiny(name, command=TALKS), plane.clock.now())
        until(lambda: (plane.engine.processes.get(self.worker) or {}).get("pid"), step=plane.step)

    @property
    def log(self) -> Path:
        return Path(self.plane.engine.processes[self.worker]["log"])

    def says(self, line: int, at: float) -> None:
        """The worker prints ``line I``; the control plane steps at ``at`` (and sees it)."""
        (self.plane.home / f"go{line}").touch()
        until(lambda: f"line {line}\n" in self.log.read_text(), what=f"line {line}")
        self.plane.clock.set(at)
        self.plane.step()
        if line == 3:
            self.plane.settle_run(self.name)


@pytest.fixture
def talked(plane) -> Talker:
    """Lines 1, 2 and 3 printed at T0, T0 + 60 and T0 + 120; the clock at T0 + 150."""
    talker = Talker(plane)
    for i, at in enumerate((T0, T0 + 60, T0 + 120), start=1):
        talker.says(i, at)
    plane.clock.set(T0 + 150)
    return talker


def logs(client: Client, **query) -> tuple[int, str]:
    r = client.get("/api/workers/talk-0/logs", params=query)
    return r.status_code, r.text


def test_since_sends_the_lines_written_then_or_later(talked, client):
    assert logs(client) == (200, "line 1\nline 2\nline 3\n")
    assert logs(client, since=T0 + 60) == (200, "line 2\nline 3\n")
    assert logs(client, since=T0 + 60.5) == (200, "line 3\n")
    assert logs(client, since=T0 - 3600) == (200, "line 1\nline 2\nline 3\n")
    assert logs(client, since=T0 + 121) == (200, "")
    assert logs(client, since=T0 + 60, attempt=1) == (200, "line 2\nline 3\n")
    # the log is what the worker wrote, byte for byte; the times are beside it
    assert talked.log.read_bytes() == b"line 1\nline 2\nline 3\n"
    assert times_path(talked.log).read_text().split() == [
        "7", f"{T0:.3f}", "14", f"{T0 + 60:.3f}", "21", f"{T0 + 120:.3f}"
    ]  # fmt: skip


@pytest.mark.parametrize("bad", ["yesterday", "nan", "inf"])
def test_a_since_that_is_not_a_number_is_a_422(talked, client, bad):
    code, text = logs(client, since=bad)
    assert code == 422, text


def test_a_log_kept_without_times_counts_as_written_when_it_last_changed(talked, client):
    times_path(talked.log).unlink()  # as an older astra left it
    os.utime(talked.log, (T0 + 30, T0 + 30))
    assert logs(client, since=T0 + 30) == (200, "line 1\nline 2\nline 3\n")
    assert logs(client, since=T0 + 31) == (200, "")


def test_a_line_marked_half_written_is_sent_whole():
    data = b"one\ntwo and a half\nthree\n"
    half = data.index(b"and")  # marked at 100 halfway through "two and a half"
    at = [half, len(data)], [100.0, 160.0]
    assert data[since_offset(data, *at, since=100.0, tail=200.0) :] == data
    assert data[since_offset(data, *at, since=100.5, tail=200.0) :] == b"two and a half\nthree\n"
    assert data[since_offset(data, *at, since=160.5, tail=200.0) :] == b""
    # after the last mark: written when the log last changed (tail), never hidden when it may be new
    more = data + b"four\n"
    assert more[since_offset(more, *at, since=170.0, tail=200.0) :] == b"four\n"
    assert more[since_offset(more, *at, since=201.0, tail=200.0) :] == b""


def test_many_running_workers_are_looked_at_less_often():
    assert LogMarks.interval(1) == 1.0
    assert LogMarks.interval(10_000) == 5.0


def test_the_api_documents_since(client):
    doc = client.get("/openapi.json").json()
    for path in ("/workers/{worker}/logs", "/tasks/{worker}/logs"):
        params = {p["name"]: p for p in doc["paths"][path]["get"]["parameters"]}
        assert params["since"]["in"] == "query" and not params["since"]["required"]
        assert "seconds since the epoch" in params["since"]["description"]
