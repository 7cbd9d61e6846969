"""Realistic run specs for the benchmark: 40–60 lines each, valid, varied, reproducible.

Four shapes, mixed: a gang of GPUs (per_gpu, machines), an array (a sweep), worker groups
(task_groups with start_after), and a service (lifetime Service, a model engine). Each one
varies its quantities (120Gi, 512Mi, 12h, 1h30m, 1:00:00), env, drives, labels, YAML styles
(block and flow lists, folded scalars, quoted strings, comments). Every file is one document
that starts with the yaml-language-server modeline.
"""

from __future__ import annotations

import random
from pathlib import Path

__all__ = ["MAX_LINES", "MIN_LINES", "write_specs"]

MIN_LINES, MAX_LINES = 40, 60

TEAMS = ("vision", "speech", "llm", "rl", "infra", "search", "robotics", "bio", "ads", "eval")
WORDS = ("llama", "mistral", "vit", "whisper", "bert", "clip", "sam", "dino", "t5", "gpt", "moe", "diff")
VERBS = ("ft", "pretrain", "eval", "sweep", "distill", "serve", "sft", "dpo", "probe", "ablate")
IMAGES = (
    "nvcr.io/nvidia/pytorch:24.08-py3",
    "nvcr.io/nvidia/pytorch:24.10-py3",
    "ghcr.io/acme/trainer:2.3.1",
    "registry.acme.internal/ml/jax:0.4.33-cuda12",
    "vllm/vllm-openai:v0.6.3",
)
GPU_MODELS = ("H100", "A100", "H200", "L40S")
MEMORY = ("16Gi", "32Gi", "64Gi", "120Gi", "256Gi", "512Mi", "1.5Ti", "96G", 68719476736)
PER_GPU_MEMORY = ("60Gi", "80Gi", "120Gi", "160Gi", "200G")
DURATIONS = ("30m", "1h", "1h30m", "6h", "12h", "2d", "1:00:00", "1-12:00:00", 3600, 86400)
DRIVES = (
    ("datasets", "/data"),
    ("checkpoints", "/ckpt"),
    ("results", "/results"),
    ("code", "/code"),
    ("hf-cache", "/root/.cache/huggingface"),
    ("scratch", "/scratch"),
)
ENV = (
    ("NCCL_DEBUG", "WARN"),
    ("NCCL_IB_HCA", "mlx5"),
    ("PYTHONUNBUFFERED", "1"),
    ("HF_HOME", "/root/.cache/huggingface"),
    ("WANDB_PROJECT", "astra-bench"),
    ("OMP_NUM_THREADS", "8"),
    ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
    ("CUDA_DEVICE_MAX_CONNECTIONS", "1"),
    ("LOG_LEVEL", "info"),
    ("SERVE_PORT", "8080"),
    ("USE_FLASH_ATTN", "true"),
    ("SEED", "1234"),
)


def write_specs(folder: Path, n: int, *, seed: int = 20261129, modeline: str) -> list[Path]:
    """Write ``n`` specs under ``folder`` (in team subfolders); return their paths, sorted."""
    rng = random.Random(seed)
    paths = []
    for i in range(n):
        team = TEAMS[i % len(TEAMS)]
        text = _spec(rng, i, team, modeline)
        suffix = ".yml" if i % 7 == 0 else ".yaml"
        path = folder / team / f"run-{i:05d}{suffix}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return sorted(paths)


def _spec(rng: random.Random, i: int, team: str, modeline: str) -> str:
    shape = ("gang", "array", "groups", "service")[i % 4]
    name = f"{rng.choice(WORDS)}-{rng.choice(VERBS)}-{i:05d}"
    while True:
        lines = [modeline, f"# {team}: {shape} run {i}, generated for the benchmark"]
        lines += _metadata(rng, name, team)
        lines += ["spec:"]
        lines += {"gang": _gang, "array": _array, "groups": _groups, "service": _service}[shape](rng)
        if len(lines) < MIN_LINES:
            continue
        if len(lines) <= MAX_LINES:
            return "\n".join(lines) + "\n"


def _metadata(rng: random.Random, name: str, team: str) -> list[str]:
    out = ["metadata:", f"  name: {name}", "  labels:", f"    team: {team}"]
    out += [f"    owner: {rng.choice(('ana', 'bo', 'chen', 'dev', 'eli'))}"]
    if rng.random() < 0.5:
        out += [f'    cost-center: "{rng.randint(1000, 9999)}"']
    if rng.random() < 0.4:
        out += ["  annotations:", f"    ticket: ML-{rng.randint(100, 9999)}"]
        out += ['    note: "rerun of the previous attempt: same seed"']
    return out


def _template(
    rng: random.Random, indent: str, *, gpus: int | None, per_gpu: bool, service=False
) -> list[str]:
    out = [f"{indent}image: {rng.choice(IMAGES)}"]
    if service:
        out += [
            f"{indent}command: python",
            f"{indent}args: [-m, vllm.entrypoints.openai.api_server, --port, '8080']",
        ]
    elif rng.random() < 0.5:
        out += [
            f"{indent}command: sh",
            f"{indent}args:",
            f"{indent}  - -c",
            f"{indent}  - >-",
            f"{indent}    torchrun --nnodes=$WORLD_SIZE --node-rank=$RANK --nproc-per-node=gpu",
            f"{indent}    --master-addr=$MASTER_ADDR --master-port=$MASTER_PORT train.py",
            f"{indent}    --config configs/{rng.choice(WORDS)}.yaml",
        ]
    else:
        out += [
            f"{indent}command: python",
            f"{indent}args:",
            f"{indent}  - /code/train.py",
            f"{indent}  - --lr={rng.choice(('1e-4', '3e-4', '5e-5'))}",
            f'{indent}  - "--batch-size={rng.choice((16, 32, 64, 128))}"',
        ]
    env = rng.sample(ENV, rng.randint(2, 6))
    out += [f"{indent}env:"] + [f'{indent}  {k}: "{v}"' for k, v in env]
    out += [f"{indent}restart_policy: {rng.choice(('OnFailure', 'Never', 'OnFailure'))}"]
    out += [f"{indent}time_limit_seconds: {rng.choice(DURATIONS)}"]
    drives = rng.sample(DRIVES, rng.randint(1, 3))
    out += [f"{indent}datavolume_refs:"]
    for drive, mount in drives:
        mode = rng.choice(("ReadOnly", "ReadWrite"))
        if rng.random() < 0.5:
            out += [f"{indent}  - {{name: {drive}, mount_path: {mount}, mode: {mode}}}"]
        else:
            out += [
                f"{indent}  - name: {drive}",
                f"{indent}    mount_path: {mount}",
                f"{indent}    mode: {mode}",
            ]
    out += [f"{indent}requested_resources:"]
    r = indent + "  "
    if gpus is not None:
        out += [f"{r}gpu_requests:", f"{r}  count: {gpus}"]
        if rng.random() < 0.6:
            out += [f"{r}  models: [{', '.join(rng.sample(GPU_MODELS, rng.randint(1, 2)))}]"]
        if rng.random() < 0.5:
            out += [f"{r}  min_memory_gb: {rng.choice((40, 80, 141))}", f"{r}  healthy_only: true"]
    if per_gpu and gpus is not None:
        out += [f"{r}per_gpu:", f"{r}  cpu_cores: {rng.choice((8, 12, 16))}"]
        out += [f"{r}  memory_bytes: {rng.choice(PER_GPU_MEMORY)}"]
    else:
        out += [f"{r}cpu_cores: {rng.choice((4, 8, 16, 32))}", f"{r}memory_bytes: {rng.choice(MEMORY)}"]
    return out


def _gang(rng: random.Random) -> list[str]:
    count = rng.choice((8, 16, 32, 64))
    out = [f"  start: {rng.choice(('Gang', 'MinAvailable'))}"]
    if out[0].endswith("MinAvailable"):
        out += [f"  min_available: {rng.randint(1, 4)}"]
    out += [f"  on_failure: {rng.choice(('RestartJob', 'FailJob'))}", f"  priority: {rng.randint(-10, 100)}"]
    out += ["  network:", f"    interconnect: {rng.choice(('infiniband', 'rdma', 'nvlink'))}"]
    out += ["  topology:", f"    keep_within: {rng.choice(('fabric', 'rack', 'nvlink_domain'))}"]
    out += ["  task_template:"]
    tmpl = _template(rng, "    ", gpus=count, per_gpu=True)
    tmpl += [f"      machines: {count // 8}"]
    return out + tmpl


def _array(rng: random.Random) -> list[str]:
    size = rng.choice((10, 50, 100, 500, 2000))
    out = ["  # one copy per hyper-parameter combination", "  array:", f"    size: {size}"]
    out += [f"    max_parallel: {rng.choice((0, 4, 8, min(size, 64)))}"]
    if rng.random() < 0.5:
        out += ["  policy: Independent"]
    out += ["  on_failure: RestartTask", "  lifetime: Batch", "  task_template:"]
    return out + _template(rng, "    ", gpus=rng.choice((None, 1, 1, 2)), per_gpu=rng.random() < 0.5)


def _groups(rng: random.Random) -> list[str]:
    names = rng.sample(("prep", "trainer", "eval", "ps", "reader", "judge"), rng.randint(2, 3))
    # start_after needs workers started one after another: not a gang (start Gang refuses it)
    out = ["  start: Independent", "  on_failure: RestartJob", "  task_groups:"]
    for k, group in enumerate(names):
        out += [f"    - name: {group}", f"      replicas: {rng.choice((1, 2, 4))}"]
        if k:
            out += [f"      start_after: {names[k - 1]}"]
        out += ["      task_template:"]
        out += _short_template(rng, "        ", gpus=rng.choice((None, 8)) if k else None)
    return out


def _short_template(rng: random.Random, indent: str, *, gpus: int | None) -> list[str]:
    out = [f"{indent}image: {rng.choice(IMAGES)}", f"{indent}command: python"]
    out += [f"{indent}args: [/code/{rng.choice(VERBS)}.py, --shard, '{rng.randint(0, 9)}']"]
    name, value = rng.choice(ENV)
    out += [f"{indent}env:", f'{indent}  {name}: "{value}"']
    out += [f"{indent}time_limit_seconds: {rng.choice(DURATIONS)}"]
    drive, mount = rng.choice(DRIVES)
    out += [f"{indent}datavolume_refs: [{{name: {drive}, mount_path: {mount}}}]"]
    out += [f"{indent}requested_resources:"]
    if gpus:
        out += [f"{indent}  gpu_requests: {{count: {gpus}, min_per_machine: {gpus}}}"]
        out += [f"{indent}  per_gpu: {{cpu_cores: 12, memory_bytes: {rng.choice(PER_GPU_MEMORY)}}}"]
    else:
        out += [
            f"{indent}  cpu_cores: {rng.choice((2, 4, 8))}",
            f"{indent}  memory_bytes: {rng.choice(MEMORY)}",
        ]
    return out


def _service(rng: random.Random) -> list[str]:
    out = ["  lifetime: Service", "  start: Independent", "  on_failure: RestartTask"]
    out += [f"  priority: {rng.randint(100, 1000)}"]
    out += ["  model:", f"    engine: {rng.choice(('vllm', 'sglang', 'tgi', 'triton'))}"]
    out += ["  task_template:"]
    return out + _template(rng, "    ", gpus=rng.choice((1, 2, 4, 8)), per_gpu=True, service=True)
