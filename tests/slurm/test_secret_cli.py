"""``astra secret set|list|delete NAME --server slurm://debug``: the Slurm cluster's sealed store.

No job runs here (the store is the state folder's), so the local Slurm cluster need not be up.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.cli.app import run
from reconciler.clusters.slurm import SlurmCluster

SERVER = "slurm://debug"
CANARY = b"hf_canary_CLI_41c9e2\n\x00\xffbinary"


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ASTRA_SLURM_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("ASTRA_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)

    def call(*argv: str, stdin: bytes = b"", ok: bool = True) -> str:
        import io
        import sys

        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        code = run([*argv, "--server", SERVER])
        out, err = capsys.readouterr()
        assert (code == 0) is ok, out + err
        assert CANARY.decode(errors="ignore")[:20] not in out + err
        return out + err

    return call


def test_set_list_delete_on_slurm_never_show_a_value(cli, tmp_path: Path):
    value = tmp_path / "value"
    value.write_bytes(CANARY)
    assert cli("secret", "set", "hf-token", "--from-file", str(value)) == (
        f"secret hf-token created on {SERVER} ({len(CANARY)} bytes)\n"
    )
    assert "secret hf-token set on" in cli("secret", "set", "hf-token", "--from-file", str(value))
    cluster = SlurmCluster.from_url(SERVER, state_dir=tmp_path / "state")
    assert cluster.secrets.read("hf-token") == CANARY  # what a job reads: the bytes as given
    table = cli("secret", "list")
    assert table.splitlines()[0].split() == ["NAME", "SIZE", "SET-BY", "SET-AT", "USED-BY"]
    assert table.splitlines()[1].split()[:2] == ["hf-token", str(len(CANARY))]
    [row] = json.loads(cli("secret", "list", "-o", "json"))
    assert row["name"] == "hf-token" and row["used_by"] == []
    assert cli("secret", "delete", "hf-token") == f"secret hf-token deleted from {SERVER}\n"
    assert cluster.secrets.names() == []
    assert "no secret 'hf-token'" in cli("secret", "delete", "hf-token", ok=False)
    for path in (tmp_path / "state").rglob("*"):
        assert not path.is_file() or CANARY not in path.read_bytes()
