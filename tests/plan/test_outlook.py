"""The plan says where each run it starts would start now: the real scheduler, through the control
plane's dry run (``POST /runs:placement``), as ``astra plan`` shows it in text, markdown and JSON."""

from __future__ import annotations

import io
import json

import httpx
import pytest

from reconciler.cli.app import run
from reconciler.clusters.http import HttpCluster
from reconciler.plan import plan_from_json
from tests.controlplane_api.conftest import TOKEN, Client, Plane

BIG = {  # 14 of the 16 machines, held: 16 GPUs stay free
    "metadata": {"name": "big"},
    "spec": {
        "task_template": {
            "image": "busybox",
            "command": "sleep",
            "args": ["60"],
            "requested_resources": {"machines": 14, "gpu_requests": {"count": 112}},
        }
    },
}


def spec(name: str, body: str) -> str:
    template = f"image: x, command: 'true', time_limit_seconds: 3600, {body}"
    return f"metadata: {{name: {name}}}\nspec: {{task_template: {{{template}}}}}\n"


@pytest.fixture
def served(monkeypatch, capsys, tmp_path):
    """``astra`` talking to a real control plane (in-process), whose cluster holds ``BIG``."""
    plane = Plane(tmp_path)
    client = Client(plane)
    astra = Astra(plane)

    def forward(req: httpx.Request) -> httpx.Response:
        path, headers = req.url.raw_path.decode(), dict(req.headers)
        astra.seen.append(f"{req.method} {path}")
        if path.endswith(":placement") and astra.placement_answers is not None:
            return httpx.Response(astra.placement_answers, json={"detail": "not here"})
        got = client.request(req.method, path, headers=headers, content=req.content, token=None)
        return httpx.Response(got.status_code, headers=got.headers, content=got.content)

    cluster = HttpCluster("http://astra.test", TOKEN, transport=httpx.MockTransport(forward))
    monkeypatch.setattr("reconciler.cli.connect.connect", lambda server, token, **_: cluster)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.chdir(tmp_path)
    assert client.post("/api/runs", json=BIG).status_code == 201
    plane.step()
    (tmp_path / "runs").mkdir()
    files = {
        "a-train": "requested_resources: {machines: 2, gpu_requests: {count: 16}}",
        "b-later": "requested_resources: {machines: 2, gpu_requests: {count: 16}}",
    }
    for name, body in files.items():
        (tmp_path / "runs" / f"{name}.yaml").write_text(spec(name, body))

    astra.capsys = capsys
    yield astra
    plane.close()


class Astra:
    """``astra ARGS`` as a user runs it: (exit code, stdout, stderr); the calls it made."""

    def __init__(self, plane: Plane) -> None:
        self.plane = plane
        self.seen: list[str] = []
        #: a status the server answers ``POST /runs:placement`` with instead (``None``: it serves it)
        self.placement_answers: int | None = None
        self.capsys = None

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = run(list(argv))
        out, err = self.capsys.readouterr()
        return code, out, err


def test_the_plan_says_where_a_run_would_start_and_why_another_would_wait(served, snapshot):
    code, out, err = served("plan", "-f", "runs", "--source", "s")
    assert (code, err) == (0, "")
    assert out == snapshot
    assert "would start: 2 machines x 8 GPUs" in out and "would wait: Waiting for room" in out
    assert set(served.plane.engine.state.runs) == {"big"}  # the dry run made nothing


def test_the_plan_json_and_markdown_carry_it_and_the_saved_plan_reads_back(served, tmp_path):
    _, out, _ = served("plan", "-f", "runs", "--source", "s", "-o", "json")
    data = json.loads(out)
    outlooks = {c["address"]: c.get("outlook") for c in data["changes"]}
    assert outlooks["a-train"]["kind"] == "start" and outlooks["b-later"]["kind"] == "wait"
    assert data["format_version"] == "2"  # an optional field: older plans still read
    assert plan_from_json(data).changes[0].outlook == outlooks[data["changes"][0]["address"]]
    _, md, _ = served("plan", "-f", "runs", "--source", "s", "-o", "markdown")
    assert "**Where they would start now**" in md
    assert "- `a-train`: would start: 2 machines x 8 GPUs" in md


def test_a_plan_with_nothing_to_start_asks_no_dry_run(served):
    assert served("apply", "-f", "runs", "--source", "s", "--yes")[0] == 0
    served.seen.clear()
    code, out, _ = served("plan", "-f", "runs", "--source", "s")
    assert code == 0 and "No changes" in out
    assert not any("placement" in s for s in served.seen)


@pytest.mark.parametrize("status", [404, 405, 500, 503])
def test_a_cluster_without_the_route_or_failing_it_shows_no_line_and_the_plan_goes_on(served, status):
    served.placement_answers = status
    code, out, err = served("plan", "-f", "runs", "--source", "s")
    assert (code, err) == (0, "")
    assert "would " not in out and "+ a-train  create  (runs/a-train.yaml)" in out
    assert any("placement" in s for s in served.seen)  # asked, and the plan went on without it
