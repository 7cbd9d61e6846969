"""An ask no machine of the cluster could ever hold is caught at plan (and apply refuses it), in
words; a plan shows what each run it creates asks for."""

from __future__ import annotations

import io

import httpx
import pytest
from controlplane_api.conftest import TOKEN, Client, Plane

from reconciler.cli.app import run
from reconciler.clusters.http import HttpCluster
from reconciler.plan import describe_ask, impossible_ask
from reconciler.runs import Capacity

CAP = Capacity(largest_gpus=8, total_gpus=128, machines=16)


def doc(spec: dict) -> dict:
    return {"metadata": {"name": "r"}, "spec": spec}


def gpus(n: int, **resources) -> dict:
    return {"image": "x", "requested_resources": {"gpu_requests": {"count": n}, **resources}}


def test_what_a_run_asks_for_and_why_no_machine_could_hold_it():
    plain, huge = doc({"task_template": gpus(16)}), doc({"task_template": gpus(100_000_000_000)})
    array = doc({"array": {"size": 100, "max_parallel": 8}, "task_template": gpus(16)})
    split = doc({"task_template": gpus(32, machines=2)})
    groups = doc({"task_groups": [{"name": "ps", "replicas": 2, "task_template": gpus(12)}]})
    assert describe_ask(plain) == "16 GPUs" and describe_ask(doc({"task_template": {"image": "x"}})) is None
    assert describe_ask(array) == "100 copies of 16 GPUs, at most 8 at once"
    assert impossible_ask(plain, CAP) is None
    assert impossible_ask(huge, CAP) == (
        "no machine of this cluster has 100000000000 GPUs; the largest has 8, and all 16 together have 128"
    )
    assert (
        impossible_ask(array, CAP)
        == "no machine of this cluster has 16 GPUs (an array copy); the largest has 8"
    )
    assert impossible_ask(split, CAP) == (
        "no machine of this cluster has 16 GPUs (each of its machines); the largest has 8"
    )
    assert "(a worker of group ps)" in (impossible_ask(groups, CAP) or "")


@pytest.fixture
def cli(monkeypatch, capsys, tmp_path):
    plane = Plane(tmp_path)
    client = Client(plane)

    def forward(req: httpx.Request) -> httpx.Response:
        path, headers = req.url.raw_path.decode(), dict(req.headers)
        got = client.request(req.method, path, headers=headers, content=req.content, token=None)
        return httpx.Response(got.status_code, headers=got.headers, content=got.content)

    cluster = HttpCluster("http://astra.test", TOKEN, transport=httpx.MockTransport(forward))
    monkeypatch.setattr("reconciler.cli.connect.connect", lambda server, token, **_: cluster)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    monkeypatch.chdir(tmp_path)

    def call(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = run(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    yield call
    plane.close()


def test_plan_catches_an_ask_no_machine_could_hold_and_apply_refuses_it(cli, tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "huge.yaml").write_text(
        "metadata: {name: huge}\nspec: {task_template: {image: x, time_limit_seconds: 60, "
        "requested_resources: "
        "{gpu_requests: {count: 100000000000}}}}\n"
    )
    (tmp_path / "runs" / "fine.yaml").write_text(
        "metadata: {name: fine}\nspec: {task_template: {image: x, time_limit_seconds: 60, "
        "requested_resources: "
        "{gpu_requests: {count: 4}}}}\n"
    )
    code, out, err = cli("plan", "runs", "--source", "s")
    assert code == 1
    assert "+ fine  create  (runs/fine.yaml)\n    asks: 4 GPUs\n" in out
    assert err == (
        "astra: error: huge: no machine of this cluster has 100000000000 GPUs; the largest has 8, "
        "and all 16 together have 128\n"
    )
    code, out, err = cli("apply", "runs", "--source", "s", "--yes")
    assert code == 1 and err.endswith(
        "astra: error: not applied: no machine of the cluster could hold these runs\n"
    )
    (tmp_path / "runs" / "huge.yaml").unlink()
    assert cli("apply", "runs", "--source", "s", "--yes")[0] == 0
