"""The process executor: CONTRACT §6's environment exactly, logs, exit codes, process-group kills."""

from __future__ import annotations

import os
from pathlib import Path

from reconciler.controlplane.executor import process_alive

from .conftest import Plane, until
from .test_api import tiny

HOST = {
    "PATH": os.environ["PATH"],
    "HOME": "/home/someone",
    "SLURM_ARRAY_TASK_ID": "5",
    "ASTRA_TOKEN": "secret",
}


def env_of(plane: Plane, worker: str) -> dict[str, str]:
    text = Path(plane.engine.processes[worker]["log"]).read_text()
    return dict(line.split("=", 1) for line in text.splitlines())


def env_run(name: str, **spec) -> dict:
    doc = tiny(name, **spec)
    doc["spec"]["task_template"].update(command="env", args=[])
    return doc


def test_array_copies_get_exactly_the_contract_environment(tmp_path):
    plane = Plane(tmp_path, host_env=HOST)
    doc = env_run("sweep", array={"size": 3, "max_parallel": 2})
    doc["spec"]["task_template"]["env"] = {"LR": "0.1"}
    plane.engine.submit(doc, plane.clock.now())
    plane.settle_run("sweep")
    assert plane.run("sweep").state == "Completed"
    for i in range(3):
        i = str(i)
        assert env_of(plane, f"sweep-{i}") == {
            "PATH": HOST["PATH"],
            "HOME": "/home/someone",
            "LR": "0.1",
            "RANK": i,
            "WORLD_SIZE": "3",
            "SLURM_PROCID": i,
            "SLURM_NTASKS": "3",
            "ASTRAEUS_ATTEMPT": "0",
            "ASTRAEUS_ARRAY_TASK_ID": i,
            "ASTRAEUS_ARRAY_SIZE": "3",
            "ASTRAEUS_REPLICA_INDEX": i,
        }
    plane.close()


def test_a_multi_worker_run_gets_the_leader_address_and_port(tmp_path):
    plane = Plane(tmp_path, host_env=HOST)
    doc = env_run("train")
    doc["spec"]["task_template"]["requested_resources"] = {"machines": 2, "gpu_requests": {"count": 16}}
    plane.engine.submit(doc, plane.clock.now())
    plane.settle_run("train")
    for rank in ("0", "1"):
        env = env_of(plane, f"train-{rank}")
        assert env.pop("MASTER_ADDR") == "127.0.0.1" and env.pop("MASTER_PORT") == "29500"
        assert env == {
            "PATH": HOST["PATH"],
            "HOME": "/home/someone",
            "RANK": rank,
            "WORLD_SIZE": "2",
            "SLURM_PROCID": rank,
            "SLURM_NTASKS": "2",
            "ASTRAEUS_ATTEMPT": "0",
        }
    plane.close()


def test_a_single_worker_has_no_master_and_no_array_variables(tmp_path):
    plane = Plane(tmp_path, host_env=HOST)
    plane.engine.submit(env_run("one"), plane.clock.now())
    plane.settle_run("one")
    env = env_of(plane, "one-0")
    assert set(env) == {
        "PATH",
        "HOME",
        "RANK",
        "WORLD_SIZE",
        "SLURM_PROCID",
        "SLURM_NTASKS",
        "ASTRAEUS_ATTEMPT",
    }
    plane.close()


def test_exit_codes_are_recorded(plane):
    plane.engine.submit(tiny("bad", command="exit 3"), plane.clock.now())
    plane.settle_run("bad")
    w = plane.worker("bad-0")
    assert (w.state, w.exit_code, w.reason) == ("Failed", 3, "Exited with code 3")
    assert plane.store.worker_row("bad-0")["exit_code"] == 3
    assert plane.run("bad").reason == f"Worker bad-0 failed on {w.machine}: Exited with code 3"


def test_a_missing_command_exits_127_with_the_reason_in_its_log(plane):
    doc = tiny("nope")
    doc["spec"]["task_template"].update(command="/no/such/program", args=[])
    plane.engine.submit(doc, plane.clock.now())
    plane.settle_run("nope")
    assert plane.worker("nope-0").exit_code == 127
    reason = "Could not start '/no/such/program': No such file or directory"
    assert plane.worker("nope-0").reason == f"{reason} (exit code 127)"
    assert reason in Path(plane.engine.processes["nope-0"]["log"]).read_text()


def test_the_image_is_recorded_not_pulled(plane):
    plane.engine.submit(tiny("img"), plane.clock.now())
    plane.settle_run("img")
    assert plane.store.worker_row("img-0")["image"] == "busybox"


def test_the_local_cluster_pulls_at_once_through_the_pulling_state(plane):
    """Placed, Pulling (``Pulling image IMAGE``), ReadyToStart and started in the same instant."""
    plane.engine.submit(tiny("img"), plane.clock.now())
    plane.settle_run("img")
    seen = [(e["kind"], e["state"], e["reason"], e["at"]) for e in plane.store.event_rows("img")]
    kinds = [k for k, *_ in seen]
    assert kinds.index("PlaceWorker") < kinds.index("ImagePulling") < kinds.index("WorkerReady")
    assert kinds.index("WorkerReady") < kinds.index("StartWorker")
    pulling = seen[kinds.index("ImagePulling")]
    assert pulling[1:3] == ("Pulling", "Pulling image busybox")
    assert seen[kinds.index("WorkerReady")][1] == "ReadyToStart"
    assert pulling[3] == seen[kinds.index("StartWorker")][3]  # instant: no time passes


def _group(plane: Plane, name: str, pids_file) -> list[int]:
    plane.engine.submit(tiny(name, command=f"sleep 300 & echo $$ $! > {pids_file}; wait"), plane.clock.now())
    until(lambda: pids_file.exists() and len(pids_file.read_text().split()) == 2, step=plane.step)
    pids = [int(p) for p in pids_file.read_text().split()]
    assert all(process_alive(p, None) for p in pids)
    return pids


def test_cancel_kills_the_whole_process_group(plane, tmp_path):
    pids = _group(plane, "c", tmp_path / "pids")
    plane.engine.cancel("c", plane.clock.now())
    assert plane.run("c").state == "Cancelled"
    assert plane.worker("c-0").reason == "Cancelled by a user"
    until(lambda: not any(process_alive(p, None) for p in pids), step=plane.step, what="the group to die")


def test_a_time_limit_kills_the_whole_process_group_and_is_final(plane, tmp_path):
    pids_file = tmp_path / "pids"
    doc = tiny("t", command=f"sleep 300 & echo $$ $! > {pids_file}; wait")
    doc["spec"]["task_template"].update(time_limit_seconds=60, restart_policy="OnFailure")
    plane.engine.submit(doc, plane.clock.now())
    until(lambda: pids_file.exists() and len(pids_file.read_text().split()) == 2, step=plane.step)
    pids = [int(p) for p in pids_file.read_text().split()]
    plane.clock.advance(60)
    plane.step()
    w = plane.worker("t-0")
    assert (w.state, w.reason) == ("Failed", "Stopped at its time limit of 1m")
    until(lambda: not any(process_alive(p, None) for p in pids), step=plane.step, what="the group to die")
    assert plane.run("t").state == "Failed"
