"""Rotating a Slurm cluster's secrets key: ``SlurmSecrets.rotate`` on a folder (values readable
after, the old key opens none, a rotation cut short loses nothing), and ``astra secret rotate-key
--server slurm://debug`` on the REAL local Slurm cluster (a run started after it reads them)."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from reconciler.cli.app import run
from reconciler.clusters.slurm import SlurmCluster
from reconciler.clusters.slurm import secrets as secrets_module
from reconciler.clusters.slurm.secrets import KEY_VARIABLE, SlurmSecrets

from .test_integration import doc, final

SERVER = "slurm://debug"
VALUES = {f"tok-{i}": f"canary_{i}_9d1e\n\x00\xff".encode() for i in range(5)}


def _store(tmp_path: Path) -> SlurmSecrets:
    store = SlurmSecrets(tmp_path / "state", key_file=tmp_path / "keys" / "astra.key")
    for name, value in VALUES.items():
        store.store(name, value)
    return store


def _opens(key_file: Path, store: SlurmSecrets, name: str) -> bool:
    key = base64.b64decode(key_file.read_bytes().strip())
    sealed = (store.folder / name).read_bytes()
    try:
        AESGCM(key).decrypt(sealed[:12], sealed[12:], name.encode())
    except InvalidTag:
        return False
    return True


def test_rotate_seals_every_value_under_a_new_key_in_the_same_file(tmp_path: Path):
    store = _store(tmp_path)
    old = tmp_path / "old.key"
    old.write_bytes(store.key_file.read_bytes())
    assert store.rotate() == len(VALUES)
    assert store.key_file.read_bytes() != old.read_bytes()
    assert stat.S_IMODE(store.key_file.stat().st_mode) == 0o600
    assert not store.next_key_file.exists()
    reopened = SlurmSecrets(tmp_path / "state", key_file=store.key_file)  # another process's view
    assert {n: reopened.read(n) for n in reopened.names()} == VALUES
    assert not any(_opens(old, store, n) for n in VALUES)  # the old key opens none of them
    assert all(_opens(store.key_file, store, n) for n in VALUES)
    assert {stat.S_IMODE(p.stat().st_mode) for p in store.folder.iterdir()} == {0o600}
    assert sorted(p.name for p in store.key_file.parent.iterdir()) == ["astra.key"]  # no leftovers


def test_the_key_the_environment_names_is_rotated_in_place(tmp_path: Path, monkeypatch):
    key = tmp_path / "elsewhere" / "slurm.key"
    monkeypatch.setenv(KEY_VARIABLE, str(key))
    store = SlurmSecrets(tmp_path / "state")
    store.store("a", b"x")
    before = key.read_bytes()
    assert store.rotate() == 1
    assert key.read_bytes() != before and store.read("a") == b"x"
    assert not (tmp_path / "state" / "secrets.key").exists()


def test_a_store_with_no_secrets_rotates_none(tmp_path: Path):
    store = SlurmSecrets(tmp_path / "state")
    assert store.rotate() == 0
    assert store.key_file.exists() and store.names() == []


@pytest.mark.parametrize("after", [0, 1, 3, len(VALUES)])
def test_a_rotation_cut_short_loses_no_value_and_the_next_one_finishes(tmp_path: Path, monkeypatch, after):
    """Killed after ``after`` values were sealed anew (0: right after the new key was written;
    all: before the new key was renamed over the old): every value still reads, and so after a
    new value is set meanwhile; the next rotation takes the same new key up and finishes."""
    store = _store(tmp_path)
    old = store.key_file.read_bytes()
    real = secrets_module._write_private
    written: list[Path] = []

    def dies(path: Path, data: bytes, *, durable: bool = False) -> None:
        if path.parent == store.folder and len(written) == after:
            raise KeyboardInterrupt("killed")
        real(path, data, durable=durable)
        if path.parent == store.folder:
            written.append(path)

    monkeypatch.setattr(secrets_module, "_write_private", dies)
    if after == len(VALUES):
        monkeypatch.setattr(secrets_module.os, "replace", _dies_on_key(store, os.replace))
    with pytest.raises(KeyboardInterrupt):
        store.rotate()
    monkeypatch.undo()
    assert store.key_file.read_bytes() == old and store.next_key_file.exists()
    pending = store.next_key_file.read_bytes()
    assert sum(_opens(store.next_key_file, store, n) for n in VALUES) == after
    reopened = SlurmSecrets(tmp_path / "state", key_file=store.key_file)
    assert {n: reopened.read(n) for n in reopened.names()} == VALUES
    reopened.store("late", b"set after the crash")
    assert reopened.rotate() == len(VALUES) + 1
    assert store.key_file.read_bytes() == pending and not store.next_key_file.exists()
    assert all(_opens(store.key_file, store, n) for n in [*VALUES, "late"])
    assert {n: reopened.read(n) for n in VALUES} == VALUES


def _dies_on_key(store: SlurmSecrets, replace):
    def replacing(src, dst):
        if Path(dst) == store.key_file:
            raise KeyboardInterrupt("killed")
        return replace(src, dst)

    return replacing


def test_a_value_that_opens_with_no_key_stops_the_rotation_before_any_write(tmp_path: Path):
    store = _store(tmp_path)
    (store.folder / "tok-2").write_bytes(b"\0" * 40)
    before = {p.name: p.read_bytes() for p in store.folder.iterdir()}
    key = store.key_file.read_bytes()
    with pytest.raises(Exception, match=r"secret 'tok-2' does not open with the key .*astra.key$"):
        store.rotate()
    assert {p.name: p.read_bytes() for p in store.folder.iterdir()} == before
    assert store.key_file.read_bytes() == key and not store.next_key_file.exists()


# ---- the CLI, on the real local Slurm cluster ----------------------------------------------------


@pytest.fixture
def slurm(slurm_state, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(KEY_VARIABLE, str(tmp_path / "keys" / "slurm.key"))  # off the shared folder

    def cli(*argv: str, server: str = SERVER, ok: bool = True) -> str:
        code = run([*argv, "--server", server])
        out, err = capsys.readouterr()
        assert (code == 0) is ok, out + err
        assert "canary" not in out + err
        return out + err

    return SlurmCluster.from_url(SERVER, state_dir=slurm_state), cli


def test_rotate_key_on_slurm_then_a_run_reads_its_secrets_masked(slurm, tmp_path: Path):
    cluster, cli = slurm
    value = tmp_path / "value"
    for name in ("tok-a", "tok-b"):
        value.write_bytes(f"{name}_canary_3c7f".encode())
        cli("secret", "set", name, "--from-file", str(value))
    key = Path(os.environ[KEY_VARIABLE])
    before = key.read_bytes()
    assert cli("secret", "rotate-key") == (
        f"secrets key rotated on {SERVER}: 2 secrets sealed with a new key in {key}\n"
    )
    assert key.read_bytes() != before
    assert [line.split()[0] for line in cli("secret", "list").splitlines()[1:]] == ["tok-a", "tok-b"]
    cluster.create_run(
        doc(
            "rotated",
            "echo a=$A b=$B",
            task_template={
                "restart_policy": "Never",
                "env": {"A": {"secret": "tok-a"}, "B": {"secret": "tok-b"}},
            },
        )
    )
    try:
        assert final(cluster, "rotated", 60).state == "Completed"
        assert cli("logs", "rotated-0").splitlines()[0] == "a=*** b=***"
    finally:
        cli("delete", "rotated", "--yes")


def test_rotate_key_of_a_server_is_refused_pointing_at_the_server_command(slurm):
    _, cli = slurm
    said = cli("secret", "rotate-key", server="http://127.0.0.1:9", ok=False)
    assert (
        "a server's secrets key is rotated on the server's machine: astra server rotate-secrets-key" in said
    )
