"""What a new Slurm run waits for before astra releases its held jobs (``clusters/slurm/held``):
runs not created yet and secrets not set, one mechanism. Slurm's commands are faked (what astra
asks of Slurm is the behaviour here); the real cluster's side is ``test_secrets.py``'s."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reconciler.clusters.slurm import SlurmCluster
from reconciler.clusters.slurm.held import awaited, held_words, missing_secrets
from reconciler.runspec.parse import parse_run

SERVER = "slurm://debug"


class FakeCommands:
    """The two ``scontrol`` calls a release makes, recorded."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def update(self, job_id: int, setting: str) -> str:
        self.calls.append(f"update {job_id} {setting}")
        return ""

    def release(self, job_id: int) -> str:
        self.calls.append(f"release {job_id}")
        return ""


def _document(
    name: str, env: dict[str, Any], *, deps: tuple[str, ...] = (), array: int = 0
) -> dict[str, Any]:
    spec: dict[str, Any] = {"task_template": {"image": "i", "command": "true", "env": env}}
    if deps:
        spec["depends_on"] = [{"run": d} for d in deps]
    if array:
        spec["array"] = {"size": array}
    return {"metadata": {"name": name}, "spec": spec}


def _record(document: dict[str, Any], job_id: int, awaiting: Any) -> dict[str, Any]:
    size = (document["spec"].get("array") or {}).get("size", 1)
    return {
        "name": document["metadata"]["name"],
        "document": document,
        "kind": "array" if size > 1 else "single",
        "size": size,
        "attempts": [{"job_id": job_id, "nonce": f"n{job_id}", "indices": None, "restart": 0, "why": ""}],
        "dependency": None,
        "awaiting": awaiting,
    }


def _cluster(tmp_path: Path) -> tuple[SlurmCluster, FakeCommands]:
    cluster = SlurmCluster("debug", state_dir=tmp_path / "state", images="host")
    fake = FakeCommands()
    cluster.commands = fake  # type: ignore[assignment]
    return cluster, fake


def test_what_a_held_run_waits_for_and_its_words():
    assert awaited({"awaiting": ["pre"]}) == (["pre"], [])  # a record made before secrets waited
    assert awaited({"awaiting": {"runs": [], "secrets": ["a"]}}) == ([], ["a"])
    assert awaited({}) == ([], [])
    run = parse_run(
        {
            "metadata": {"name": "r"},
            "spec": {
                "task_template": {
                    "image": "i",
                    "command": "true",
                    "env": {"X": {"secret": "b"}, "Y": "plain", "Z": {"secret": "a"}, "W": {"secret": "b"}},
                    "secret_files": [{"name": "key", "mount_path": "/k/id"}],
                }
            },
        }
    )
    assert missing_secrets(run, {"a"}) == ["b", "key"]  # each once, in the spec's order
    assert missing_secrets(run, {"a", "b", "key"}) == []
    words = "Secret 'b' does not exist on slurm://debug: astra secret set b --server slurm://debug"
    assert held_words({"awaiting": {"runs": [], "secrets": ["b", "key"]}}, SERVER) == words
    assert held_words({"awaiting": {"runs": ["pre"], "secrets": []}}, SERVER) is None


def test_a_run_held_for_secrets_is_released_once_all_are_set_never_before(tmp_path: Path):
    cluster, fake = _cluster(tmp_path)
    doc = _document("w", {"A": {"secret": "a"}, "B": {"secret": "b"}}, array=2)
    cluster.records.save(_record(doc, 7, {"runs": [], "secrets": ["a", "b"]}))
    cluster.set_secret("a", b"1")
    assert fake.calls == []
    assert held_words(cluster.records.load("w"), SERVER) == (
        "Secret 'b' does not exist on slurm://debug: astra secret set b --server slurm://debug"
    )
    cluster.delete_secret("a", force=True)  # deleted while it waits
    cluster.set_secret("b", b"2")
    assert fake.calls == []  # 'a' is missing again: still held
    assert awaited(cluster.records.load("w")) == ([], ["a"])
    assert not cluster.secrets.jobs.exists() or list(cluster.secrets.jobs.iterdir()) == []
    cluster.set_secret("a", b"1")
    assert fake.calls == ["release 7"]
    assert awaited(cluster.records.load("w")) == ([], [])
    files = sorted(p.name for p in cluster.secrets.jobs.iterdir())
    assert files == ["n7.0", "n7.1"]  # each copy's file, written before the release
    (part,) = json.loads((cluster.secrets.jobs / "n7.0").read_text())["parts"]  # one template: one part
    assert part["env"] == {"A": "MQ==", "B": "Mg=="}
    cluster.set_secret("a", b"1")
    assert fake.calls == ["release 7"]  # released once


def test_a_value_an_env_variable_cannot_hold_keeps_the_run_held_in_words(tmp_path: Path):
    cluster, fake = _cluster(tmp_path)
    cluster.records.save(_record(_document("n", {"A": {"secret": "a"}}), 9, {"runs": [], "secrets": ["a"]}))
    cluster.set_secret("a", b"x\0y")
    assert fake.calls == []
    assert held_words(cluster.records.load("n"), SERVER) == (
        "secret 'a' holds a NUL byte, which an environment variable cannot: give it as a secret file"
    )
    assert not list(cluster.secrets.jobs.glob("n9.*"))
    cluster.set_secret("a", b"xy")
    assert fake.calls == ["release 9"]


def test_runs_and_secrets_waited_for_by_one_release(tmp_path: Path):
    """Held for a run not created yet and a secret not set: the dependency is set once the run
    exists, and the job released only once the secret is set too, whichever comes first."""
    cluster, fake = _cluster(tmp_path)
    waiter = _document("ev", {"A": {"secret": "a"}}, deps=("pre",))
    cluster.records.save(_record(waiter, 11, {"runs": ["pre"], "secrets": ["a"]}))
    cluster.set_secret("a", b"1")
    assert fake.calls == []  # pre is not created yet
    assert awaited(cluster.records.load("ev")) == (["pre"], [])
    cluster.records.save(_record(_document("pre", {}), 5, None))
    record = cluster.records.load("ev")
    cluster._release(record, parse_run(waiter))
    assert fake.calls == ["update 11 Dependency=afterok:5", "release 11"]
    assert cluster.records.load("ev")["dependency"] == "--dependency=afterok:5"


def test_a_restart_held_for_a_secret_is_the_job_released(tmp_path: Path):
    cluster, fake = _cluster(tmp_path)
    record = _record(_document("r", {"A": {"secret": "a"}}, array=3), 20, None)
    record["attempts"].append(
        {
            "job_id": 21,
            "nonce": "n21",
            "indices": [1],
            "restart": 1,
            "why": "Exited with code 1",
            "held": True,
        }
    )
    run = parse_run(record["document"])
    assert cluster._hold_restart(record, run) is True
    assert awaited(record) == ([], ["a"])
    cluster.records.save(record)
    cluster.set_secret("a", b"1")
    assert fake.calls == ["release 21"]  # the restart, not the first job (long ended)
    assert sorted(p.name for p in cluster.secrets.jobs.iterdir()) == ["n21.1"]  # its one copy's file
    assert "held" not in cluster.records.load("r")["attempts"][1]
    assert cluster._hold_restart(cluster.records.load("r"), run) is False  # set: not held
