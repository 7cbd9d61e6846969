"""The spec → sbatch mapping, row by row of the table in docs/slurm.md (pure: no Slurm needed)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reconciler.clusters.slurm.groups import group_gpus, group_offsets, group_order, leader_file
from reconciler.clusters.slurm.mapping import gpu_shape, to_submission
from reconciler.clusters.slurm.submission import comment_for, parse_comment, spec_hash
from reconciler.runspec.parse import parse_run


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
        ({"task_template": {"max_processes": 64}}, "spec.task_template.max_processes"),
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


def test_a_secret_runs_through_the_wrapper_and_never_reaches_the_script():
    from reconciler.clusters.slurm.drives import SlurmDrives
    from reconciler.sandbox import find_node_sandbox

    secret = {
        "env": {"HF_TOKEN": {"secret": "hf-token"}, "PLAIN": "x"},
        "secret_files": [{"name": "ssh-key", "mount_path": "/k"}],
    }
    no_box = sub({"task_template": secret})
    files = "secret files need a sandbox on Slurm's nodes"
    assert [(str(e.path), e.message[: len(files)]) for e in no_box.errors] == [
        ("spec.task_template.secret_files", files)
    ]
    box, _ = find_node_sandbox()
    if box is None:
        pytest.fail("this test needs bubblewrap on the host (the node's sandbox)", pytrace=False)
    s = sub({"task_template": secret}, drives=SlurmDrives(sandbox=box))
    assert s.errors == []
    assert (
        s.script.splitlines()[-1]
        == "exec python3 /bin/astra-job.py \"$ASTRA_SECRET_FILE\" sh -c 'echo $RANK'"
    )
    assert "hf-token" not in s.script.split("# astra-document:")[0]  # only in the document line: a name
    assert "export PLAIN=x" in s.script and "HF_TOKEN=" not in s.script
    assert "--no-requeue" in s.options  # a requeued job would find its secrets file gone
    gang = sub(
        {"task_template": {**secret, "requested_resources": {"machines": 2}}}, drives=SlurmDrives(sandbox=box)
    )
    assert gang.errors == []  # carried to every node: test_secret_shapes.py


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


# ---- worker groups ------------------------------------------------------------------------------


def groups_run(groups: list[dict[str, Any]], name: str = "pt", **spec: Any) -> Any:
    for g in groups:
        g["task_template"] = {
            "image": f"img-{g['name']}",
            "command": "sh",
            "args": ["-c", "echo $RANK"],
        } | g.get("task_template", {})
    return parse_run({"metadata": {"name": name}, "spec": {"task_groups": groups, **spec}})


def group_sub(groups: list[dict[str, Any]], **kw: Any):
    spec = kw.pop("spec", {})
    defaults = {"nonce": "n0", "log_dir": "/L", "node_gpus": 8, "nodes_available": 2}
    return to_submission(groups_run(groups, **spec), **(defaults | kw))


PS_TRAINER = [
    {"name": "ps"},
    {
        "name": "trainer",
        "replicas": 2,
        "start_after": "ps",
        "task_template": {
            "requested_resources": {"gpu_requests": {"count": 2}, "cpu_cores": 4, "memory_bytes": "8Gi"},
            "env": {"ROLE": "the trainer"},
            "time_limit_seconds": 90,
        },
    },
]


def test_start_after_is_one_job_per_group_in_dependency_order():
    s = group_sub(json_copy(PS_TRAINER))
    assert (s.kind, s.size, s.errors) == ("groups", 3, [])
    assert [(j.groups, j.after) for j in s.jobs] == [((0,), None), ((1,), 0)]
    ps, trainer = s.jobs
    assert {"--job-name=pt", "--ntasks=1", "--output=/L/%j.out"} <= set(ps.options)
    assert not any(o.startswith(("--gpus", "--gres", "--dependency")) for o in ps.options)
    # each replica is one srun task with the template's whole ask per task
    assert {
        "--ntasks=2",
        "--gpus-per-task=2",
        "--cpus-per-task=4",
        "--mem-per-cpu=2048M",
        "--time=2",
    } <= set(trainer.options)
    assert "#SBATCH --ntasks=2" in trainer.script


def test_dependency_order_is_start_after_not_spec_order():
    s = group_sub(
        [{"name": "trainer", "start_after": "ps"}, {"name": "ps"}, {"name": "eval", "start_after": "trainer"}]
    )
    assert [(j.groups, j.after) for j in s.jobs] == [((1,), None), ((0,), 1), ((2,), 0)]


def test_group_wrapper_sets_rank_across_the_run():
    ps, trainer = group_sub(json_copy(PS_TRAINER)).jobs
    last = ps.script.rstrip().splitlines()[-1]
    assert last.startswith("exec srun --kill-on-bad-exit=1 --output=/L/%j.%t.out bash -c ")
    assert "export RANK=$((0+SLURM_PROCID)) WORLD_SIZE=3" in last
    assert "export SLURM_PROCID=$RANK SLURM_NTASKS=$WORLD_SIZE" in last
    assert last.endswith("astra-worker sh -c 'echo $RANK'")
    last = trainer.script.rstrip().splitlines()[-1]
    assert "export RANK=$((1+SLURM_PROCID)) WORLD_SIZE=3" in last
    assert "ROLE=" in last and "the trainer" in last  # the group's own env, inside its wrapper


def test_leader_group_writes_master_addr_and_the_others_wait_for_it():
    ps, trainer = group_sub(json_copy(PS_TRAINER), generation="g1").jobs
    assert "mv -f /L/leader.g1.$SLURM_JOB_ID /L/leader.g1" in ps.script
    assert "export MASTER_ADDR MASTER_PORT=29500" in ps.script
    assert "[ -s /L/leader.g1 ] && break" in trainer.script
    assert "MASTER_ADDR=$(cat /L/leader.g1" in trainer.script
    assert "did not start within 15 minutes" in trainer.script
    assert "export MASTER_ADDR MASTER_PORT=29500" in trainer.script
    # the generation defaults to the submission's nonce
    assert "/L/leader.n0" in group_sub(json_copy(PS_TRAINER)).jobs[0].script


def test_one_worker_in_groups_gets_no_master():
    s = group_sub([{"name": "solo"}])
    assert (s.kind, len(s.jobs)) == ("groups", 1)
    assert "MASTER_ADDR" not in s.jobs[0].script
    assert "WORLD_SIZE=1" in s.jobs[0].script


def test_gang_of_groups_without_start_after_is_one_hetjob():
    s = group_sub(
        [{"name": "engine"}, {"name": "client", "replicas": 2, "task_template": {"env": {"E": "1"}}}]
    )
    assert (s.kind, s.size, len(s.jobs)) == ("hetjob", 3, 1)
    job = s.jobs[0]
    assert job.groups == (0, 1) and job.after is None
    lines = job.script.splitlines()
    sep = lines.index("#SBATCH hetjob")
    assert "#SBATCH --ntasks=1" in lines[:sep] and "#SBATCH --ntasks=2" in lines[sep:]
    assert "#SBATCH --output=/L/%j.out" in lines[:sep]
    assert lines.count("#SBATCH --comment=" + s.comment) == 2  # every component is ours
    last = lines[-1]
    assert last.startswith("exec srun --het-group=0 ")
    assert " : --het-group=1 " in last
    assert last.count("export RANK=$SLURM_PROCID WORLD_SIZE=3") == 2
    assert "export MASTER_ADDR MASTER_PORT=29500" in job.script


def test_groups_without_gang_are_independent_jobs():
    s = group_sub([{"name": "a"}, {"name": "b"}], spec={"start": "Independent"})
    assert s.kind == "groups"
    assert [(j.groups, j.after) for j in s.jobs] == [((0,), None), ((1,), None)]


def test_pyxis_runs_each_groups_image():
    s = group_sub([{"name": "a"}, {"name": "b"}], images="pyxis")
    assert "--container-image=img-a" in s.script and "--container-image=img-b" in s.script
    s = group_sub(json_copy(PS_TRAINER), images="pyxis")
    assert "--container-image=img-trainer" in s.jobs[1].script


@pytest.mark.parametrize(
    ("groups", "spec", "kw", "path"),
    [
        ([{"name": "a"}, {"name": "b"}], {"start": "MinAvailable", "min_available": 1}, {}, "spec.start"),
        ([{"name": "a"}, {"name": "b"}], {"on_failure": "RestartTask"}, {}, "spec.on_failure"),
        ([{"name": "a"}, {"name": "b"}, {"name": "c"}], {}, {}, "spec.task_groups"),
        (
            [{"name": "a", "task_template": {"requested_resources": {"gpu_requests": {"count": 9}}}}],
            {},
            {},
            "spec.task_groups[0].task_template.requested_resources.gpu_requests.count",
        ),
        (
            [{"name": "a", "task_template": {"datavolume_refs": [{"name": "d", "mount_path": "/d"}]}}],
            {},
            {},
            "spec.task_groups[0].task_template.datavolume_refs",
        ),
    ],
)
def test_groups_refused_with_their_path(groups, spec, kw, path):
    s = group_sub(groups, spec=spec, **kw)
    assert [str(e.path) for e in s.errors] == [path]
    assert s.jobs == ()


def test_restart_task_with_start_after_is_carried():
    s = group_sub(json_copy(PS_TRAINER), spec={"on_failure": "RestartTask"})
    assert s.errors == [] and s.kind == "groups"


def test_group_helpers():
    r = groups_run(json_copy(PS_TRAINER))
    groups = list(r.spec.task_groups)
    assert group_offsets(groups) == [0, 1]
    assert group_order(groups) == [0, 1]
    assert group_gpus(r) == [0, 2]
    assert leader_file("/L", "g") == "/L/leader.g"


def json_copy(value: Any) -> Any:
    return json.loads(json.dumps(value))
