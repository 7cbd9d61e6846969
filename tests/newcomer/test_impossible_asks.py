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
        "metadata: {name: huge}\nspec: {task_template: {image: x, command: run, time_limit_seconds: 60, "
        "requested_resources: "
        "{gpu_requests: {count: 100000000000}}}}\n"
    )
    (tmp_path / "runs" / "fine.yaml").write_text(
        "metadata: {name: fine}\nspec: {task_template: {image: x, command: run, time_limit_seconds: 60, "
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
    assert code == 1 and err.endswith("astra: error: not applied: this cluster could never run these runs\n")
    (tmp_path / "runs" / "huge.yaml").unlink()
    assert cli("apply", "runs", "--source", "s", "--yes")[0] == 0


#: Each resource an ask can never get (on the default local cluster: 16 machines, each 8 H100 of
#: 80 GB, 128 cores, 2Ti; a rack's InfiniBand fabric of 4 machines, NVLink domains of 2), with the
#: words plan and apply say: the resource, the ask as written (each worker's, or per GPU) and the
#: largest machine's.
NEVER = [
    (
        "gpus",
        "gpu_requests: {count: 200}",
        "no machine of this cluster has 200 GPUs; the largest has 8, and all 16 together have 128",
    ),
    (
        "cores",
        "gpu_requests: {count: 1}, cpu_cores: 500",
        "cpu_cores 500 for each worker, but the largest machine has 128 cores",
    ),
    (
        "memory",
        "gpu_requests: {count: 1}, memory_bytes: 900Ti",
        "memory_bytes 900Ti for each worker, but the largest machine has 2Ti of memory",
    ),
    (
        "cores-per-gpu",
        "gpu_requests: {count: 8, min_per_machine: 8}, per_gpu: {cpu_cores: 20}",
        "per_gpu.cpu_cores 20 per GPU: 160 cores on one machine for its 8 GPUs, "
        "but the largest machine has 128 cores",
    ),
    (
        "memory-per-gpu",
        "gpu_requests: {count: 2}, per_gpu: {memory_bytes: 3Ti}",
        "per_gpu.memory_bytes 3Ti per GPU: 3Ti of memory on one machine for its "
        "GPU, but the largest machine has 2Ti",
    ),
    (
        "model",
        "gpu_requests: {count: 1, models: [B200]}",
        "gpu_requests.models B200 but no machine has those GPUs (the cluster has H100)",
    ),
    (
        "gpu-memory",
        "gpu_requests: {count: 1, min_memory_gb: 141}",
        "gpu_requests.min_memory_gb 141 but the largest GPU memory is 80 GB",
    ),
    (
        "interconnect",
        "gpu_requests: {count: 40} | network: {interconnect: infiniband}",
        "network.interconnect infiniband but no infiniband network can hold 40 "
        "GPUs; the largest infiniband network has 32",
    ),
    (
        "keep-within",
        "gpu_requests: {count: 40} | topology: {keep_within: rack}",
        "topology.keep_within rack but no rack can hold 40 GPUs; the largest rack has 32",
    ),
]


@pytest.mark.parametrize(("name", "resources", "words"), NEVER, ids=[n for n, _, _ in NEVER])
def test_every_resource_an_ask_can_never_get_is_refused_the_same_way(cli, tmp_path, name, resources, words):
    resources, _, beside = resources.partition(" | ")  # beside: spec fields next to the template
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / f"{name}.yaml").write_text(
        f"metadata: {{name: {name}}}\nspec: {{task_template: {{image: x, command: run, "
        "time_limit_seconds: 60, "
        f"requested_resources: {{{resources}}}}}{', ' + beside if beside else ''}}}\n"
    )
    code, _, err = cli("plan", "runs", "--source", "s")
    assert (code, err) == (1, f"astra: error: {name}: {words}\n")
    code, _, err = cli("apply", "runs", "--source", "s", "--yes")
    assert code == 1
    assert err == (
        f"astra: error: {name}: {words}\nastra: error: not applied: this cluster could never run these runs\n"
    )


def test_a_run_with_no_command_is_refused_before_it_is_sent_to_the_local_cluster(cli, tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "llama-ft.yaml").write_text(
        "metadata: {name: llama-ft}\nspec: {task_template: {image: nvcr.io/nvidia/pytorch:24.08-py3, "
        "time_limit_seconds: 60, requested_resources: {gpu_requests: {count: 16}}}}\n"
    )
    words = (
        "llama-ft: this worker names no command, and the local executor cannot run an image's "
        "entrypoint: give task_template.command"
    )
    code, out, err = cli("plan", "runs", "--source", "s")
    assert (code, err) == (1, f"astra: error: {words}\n")
    assert "would fail: this worker names no command" in out
    code, _, err = cli("apply", "runs", "--source", "s", "--yes")
    assert (code, err) == (
        1,
        f"astra: error: {words}\nastra: error: not applied: this cluster could never run these runs\n",
    )
