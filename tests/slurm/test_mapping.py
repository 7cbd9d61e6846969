"""The spec → sbatch mapping, row by row of the table in docs/slurm.md (pure: no Slurm needed)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.clusters.slurm_mapping import (
    comment_for,
    gpu_shape,
    parse_comment,
    spec_hash,
    to_submission,
)
from reconciler.spec.parse import parse_run


def run(spec: dict[str, Any], name: str = "r") -> Any:
    template = {"image": "img:1", "command": "sh", "args": ["-c", "echo $RANK"]}
    template.update(spec.pop("task_template", {}))
    return parse_run({"metadata": {"name": name}, "spec": {"task_template": template, **spec}})


def sub(spec: dict[str, Any], node_gpus: int | None = 8, **kw: Any):
    return to_submission(run(spec), nonce="n0", log_dir="/L", node_gpus=node_gpus, **kw)


def opts(spec: dict[str, Any], **kw: Any) -> list[str]:
    s = sub(spec, **kw)
    assert s.errors == []
    return list(s.options)


def test_array_is_one_submission_with_a_throttle():
    s = sub({"array": {"size": 6, "max_parallel": 2}})
    assert (s.kind, s.size) == ("array", 6)
    assert "--array=0-5%2" in s.options
    assert "--output=/L/%A_%a.out" in s.options
    assert "#SBATCH --array=0-5%2" in s.script


def test_array_without_cap():
    assert "--array=0-9" in opts({"array": {"size": 10}})
    assert "--array=0-9" in opts({"array": {"size": 10, "max_parallel": 0}})


def test_array_wrapper_sets_astraeus_names_and_unsets_slurm_array():
    script = sub({"array": {"size": 6, "max_parallel": 2}}).script
    assert 'ASTRA_INDEX="$SLURM_ARRAY_TASK_ID"' in script
    assert "export ASTRAEUS_ARRAY_TASK_ID=$ASTRA_INDEX ASTRAEUS_ARRAY_SIZE=6" in script
    assert "RANK=$ASTRA_INDEX WORLD_SIZE=6" in script
    assert "export SLURM_PROCID=$ASTRA_INDEX SLURM_NTASKS=6" in script
    assert "unset ASTRA_INDEX ${!SLURM_ARRAY_@}" in script
    assert script.rstrip().endswith("exec sh -c 'echo $RANK'")


def test_single_worker():
    s = sub({"task_template": {"requested_resources": {"gpu_requests": {"count": 2}}}})
    assert (s.kind, s.size) == ("single", 1)
    assert {"--nodes=1", "--ntasks=1", "--gres=gpu:2"} <= set(s.options)
    assert "export RANK=0 WORLD_SIZE=1 SLURM_PROCID=0 SLURM_NTASKS=1" in s.script


def test_gang_over_machines_uses_srun_and_sets_master():
    s = sub({"task_template": {"requested_resources": {"gpu_requests": {"count": 4}, "machines": 2}}})
    assert (s.kind, s.size, s.nodes, s.gpus_per_worker) == ("gang", 2, 2, 2)
    assert {"--nodes=2", "--ntasks-per-node=1", "--gpus-per-node=2"} <= set(s.options)
    assert "MASTER_PORT=29500" in s.script
    last = s.script.rstrip().splitlines()[-1]
    assert last.startswith("exec srun --kill-on-bad-exit=1 --output=/L/%j.%t.out bash -c ")
    assert "export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS" in last


def test_gang_shape_from_the_largest_node():
    s = sub({"task_template": {"requested_resources": {"gpu_requests": {"count": 16}}}})
    assert (s.kind, s.nodes, s.gpus_per_worker) == ("gang", 2, 8)


@pytest.mark.parametrize(
    ("count", "machines", "k", "node", "shape"),
    [
        (16, None, None, 8, (2, 8)),
        (8, None, None, 8, (1, 8)),
        (12, None, None, 8, (2, 6)),
        (12, None, 6, 8, (2, 6)),
        (12, None, 7, 8, None),
        (16, 4, None, 8, (4, 4)),
        (3, None, None, None, (1, 3)),
        (7, None, 2, 4, None),
    ],
)
def test_gpu_shape(count, machines, k, node, shape):
    assert gpu_shape(count, machines, k, node) == shape


def test_gpu_models_one_is_a_gres_type_several_a_constraint():
    one = opts({"task_template": {"requested_resources": {"gpu_requests": {"count": 1, "models": ["a100"]}}}})
    assert "--gres=gpu:a100:1" in one
    two = opts(
        {"task_template": {"requested_resources": {"gpu_requests": {"count": 1, "models": ["a100", "h100"]}}}}
    )
    assert {"--gres=gpu:1", "--constraint=a100|h100"} <= set(two)


def test_cpu_memory_and_per_gpu():
    o = opts({"task_template": {"requested_resources": {"cpu_cores": 8, "memory_bytes": "32Gi"}}})
    assert {"--cpus-per-task=8", "--mem=32768M"} <= set(o)
    per = {"gpu_requests": {"count": 2}, "per_gpu": {"cpu_cores": 12, "memory_bytes": "120Gi"}}
    o = opts({"task_template": {"requested_resources": per}})
    assert {"--cpus-per-gpu=12", "--mem-per-gpu=122880M"} <= set(o)


def test_time_limit_in_whole_minutes_rounded_up():
    assert "--time=720" in opts({"task_template": {"time_limit_seconds": "12h"}})
    assert "--time=2" in opts({"task_template": {"time_limit_seconds": 61}})


def test_env_is_exported_quoted():
    script = sub({"task_template": {"env": {"GREETING": "hello world"}}}).script
    assert "export GREETING='hello world'" in script


def test_partition_and_identity():
    r = run({}, name="train")
    s = to_submission(r, nonce="abc", log_dir="/L", partition="gpu")
    assert "--partition=gpu" in s.options
    assert "--job-name=train" in s.options
    assert f"--comment=astra/v1,spec={spec_hash(r)},sub=abc" in s.options
    assert parse_comment(comment_for(r, "abc")) == {"spec": spec_hash(r), "sub": "abc"}
    assert parse_comment("someone else's") is None
    assert '# astra-document: {"metadata":{"name":"train"}' in s.script


def test_spec_hash_is_of_the_normalized_spec():
    assert spec_hash(run({"task_template": {"time_limit_seconds": "1h"}})) == spec_hash(
        run({"task_template": {"time_limit_seconds": 3600}})
    )
    assert spec_hash(run({})) != spec_hash(run({"task_template": {"time_limit_seconds": 60}}))


def test_pyxis_runs_the_image():
    s = sub({"array": {"size": 2}}, images="pyxis")
    last = s.script.rstrip().splitlines()[-1]
    assert last.startswith("exec srun --container-image=img:1 bash -c ")
    assert "export SLURM_PROCID=$RANK SLURM_NTASKS=$WORLD_SIZE" in last


# ---- fields Slurm cannot carry: an error naming the field, never a silent drop ------------------


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"network": {"interconnect": "infiniband"}}, "spec.network.interconnect"),
        ({"topology": {"keep_within": "rack"}}, "spec.topology.keep_within"),
        ({"model": {"engine": "vllm"}}, "spec.model.engine"),
        ({"priority": 5}, "spec.priority"),
        (
            {"task_template": {"datavolume_refs": [{"name": "d", "mount_path": "/d"}]}},
            "spec.task_template.datavolume_refs",
        ),
        (
            {"task_template": {"requested_resources": {"gpu_requests": {"count": 1, "min_memory_gb": 80}}}},
            "spec.task_template.requested_resources.gpu_requests.min_memory_gb",
        ),
        (
            {
                "start": "MinAvailable",
                "min_available": 1,
                "task_template": {"requested_resources": {"machines": 2}},
            },
            "spec.start",
        ),
        (
            {"start": "Independent", "task_template": {"requested_resources": {"machines": 2}}},
            "spec.start",
        ),
        (
            {"on_failure": "RestartTask", "task_template": {"requested_resources": {"machines": 2}}},
            "spec.on_failure",
        ),
        (
            {"task_template": {"requested_resources": {"gpu_requests": {"count": 12, "min_per_machine": 7}}}},
            "spec.task_template.requested_resources.gpu_requests.count",
        ),
    ],
)
def test_unsupported_field_is_an_error_with_its_path(spec, path):
    s = sub(spec)
    assert [str(e.path) for e in s.errors] == [path]
    assert s.script == ""


def test_every_unsupported_field_is_reported_not_only_the_first():
    s = sub({"network": {"interconnect": "rdma"}, "topology": {"keep_within": "fabric"}, "priority": 1})
    assert sorted(str(e.path) for e in s.errors) == [
        "spec.network.interconnect",
        "spec.priority",
        "spec.topology.keep_within",
    ]


def test_no_command():
    r = parse_run({"metadata": {"name": "r"}, "spec": {"task_template": {"image": "img"}}})
    s = to_submission(r, nonce="n", log_dir="/L")
    assert [str(e.path) for e in s.errors] == ["spec.task_template.command"]


def test_task_groups_are_refused_for_now():
    r = parse_run(
        {
            "metadata": {"name": "r"},
            "spec": {"task_groups": [{"name": "a", "task_template": {"image": "i", "command": "true"}}]},
        }
    )
    s = to_submission(r, nonce="n", log_dir="/L")
    assert [str(e.path) for e in s.errors] == ["spec.task_groups"]
