"""A create's cost line says what it would spend of its workspace's GPU-hour budget if it ran to
its time limit (issue 35), as the control plane's ``GET /workspaces/{name}/budget`` tells the plan;
a workspace without a budget gets no such line."""

from __future__ import annotations

import io
import json

import httpx
import pytest

from reconciler.cli.app import run
from reconciler.clusters.http import HttpCluster
from reconciler.plan import plan_from_json
from tests.controlplane_api.conftest import TOKEN, Client, Plane

ASKS = "image: x, command: sleep, requested_resources: {gpu_requests: {count: %d}}"
FILES = {  # each run's task template: its time limit and the GPUs it asks for
    "train": "{time_limit_seconds: 12h, " + ASKS % 8 + "}",
    "sweep": "{time_limit_seconds: 1h, " + ASKS % 1 + "}",
    "open": "{" + ASKS % 2 + "}",
}

#: the lint's warning on the run that states no time limit
NO_LIMIT = (
    "open (runs/open.yaml): spec.task_template.time_limit_seconds: warning: "
    "without a time limit a run cannot backfill\n"
)


@pytest.fixture
def astra(monkeypatch, capsys, tmp_path):
    """``astra ARGS`` (exit code, stdout, stderr) against a real control plane (in-process)."""
    plane = Plane(tmp_path)
    client = Client(plane)

    def forward(req: httpx.Request) -> httpx.Response:
        got = client.request(req.method, req.url.raw_path.decode(), headers=dict(req.headers),
                             content=req.content, token=None)  # fmt: skip
        return httpx.Response(got.status_code, headers=got.headers, content=got.content)

    cluster = HttpCluster("http://astra.test", TOKEN, transport=httpx.MockTransport(forward))
    monkeypatch.setattr("reconciler.cli.connect.connect", lambda server, token, **_: cluster)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    for name, template in FILES.items():
        array = ", array: {size: 100}" if name == "sweep" else ""
        text = f"metadata: {{name: {name}}}\nspec: {{task_template: {template}{array}}}\n"
        (tmp_path / "runs" / f"{name}.yaml").write_text(text)

    def call(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = run(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    call.client = client  # type: ignore[attr-defined]
    yield call
    plane.close()


def test_a_create_s_cost_line_says_its_share_of_the_workspace_s_budget(astra, snapshot):
    r = astra.client.put("/api/workspaces/default/budget", json={"gpu_hours": 5000, "per": "month"})
    assert r.status_code == 200, r.text
    code, out, err = astra("plan", "-f", "runs", "--source", "s")
    assert code == 0 and err == NO_LIMIT
    assert out == snapshot
    assert "cost: 8 GPUs × 12h = 96 GPU-hours, 2% of default's 5000 left of 5000 this month" in out
    assert "cost: 100 copies × 1 GPU × 1h = 100 GPU-hours, 2% of default's 5000" in out
    assert "cost: no time limit: nothing bounds what it spends of default's 5000 GPU-hours" in out


def test_the_budget_is_in_the_plan_s_json_and_a_saved_plan_reads_it_back(astra):
    astra.client.put("/api/workspaces/default/budget", json={"gpu_hours": 40, "per": "week"})
    _, out, _ = astra("plan", "-f", "runs", "--source", "s", "-o", "json")
    data = json.loads(out)
    assert data["budget"] == {"workspace": "default", "gpu_hours": 40, "per": "week", "left_gpu_hours": 40.0}
    assert plan_from_json(data).budget == data["budget"]
    _, md, _ = astra("plan", "-f", "runs", "--source", "s", "-o", "markdown")
    assert "| 8 GPUs × 12h = 96 GPU-hours, 240% of default's 40 left of 40 this week |" in md


def test_without_a_budget_a_create_has_no_cost_line(astra):
    code, out, err = astra("plan", "-f", "runs", "--source", "s")
    assert code == 0 and err == NO_LIMIT
    assert "+ train  create  (runs/train.yaml)" in out and "asks: 8 GPUs" in out
    assert "cost:" not in out and "GPU-hours" not in out
    _, js, _ = astra("plan", "-f", "runs", "--source", "s", "-o", "json")
    assert "budget" not in json.loads(js)


def test_a_spent_budget_says_the_create_waits_and_a_cluster_without_budgets_gives_none():
    from reconciler.plan import describe_spend
    from reconciler.reconcile import budget_of

    spent = {"workspace": "team-a", "gpu_hours": 5000, "per": "month", "left_gpu_hours": 0.0}
    doc = {
        "spec": {
            "task_template": {
                "time_limit_seconds": 7200,
                "requested_resources": {"gpu_requests": {"count": 4}},
            }
        }
    }
    assert describe_spend(doc, spent) == (
        "4 GPUs × 2h = 8 GPU-hours; "
        "team-a has used its 5000 GPU-hours this month: it waits until the next month"
    )

    class Slurmish:  # the protocol alone: no ``budget``
        address = "slurm://"

    assert budget_of(Slurmish(), creates=True) is None  # type: ignore[arg-type]
