"""PostgreSQL for real: the control plane's store (``astra server --db``) and the source state
(``--state``) migrate, open, and carry a plan and an apply on a real PostgreSQL server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from controlplane_api.conftest import free_port, until
from plan import test_state as state_cases

from reconciler.controlplane.store import Store
from reconciler.controlplane.store.migrations import FENCE, HEAD
from reconciler.state import SqlSourceStore
from reconciler.state.migrations import HEAD as STATE_HEAD
from reconciler.state.migrations import REVISIONS as STATE_REVISIONS

ROOT = Path(__file__).resolve().parents[2]


def test_the_store_migrates_a_new_postgres_database_and_reopens_it(postgres):
    store = Store(postgres)
    assert (store.revision(), store.schema_version()) == (HEAD, FENCE)
    store.close()
    again = Store(postgres)  # the fast path: already at the head
    assert again.revision() == HEAD
    again.close()


def test_the_source_state_migrates_on_postgres_and_behaves_as_on_sqlite(postgres):
    from reconciler.migrate import revision

    store = SqlSourceStore(postgres)
    with store.engine.connect() as conn:
        assert revision(conn, STATE_REVISIONS) == STATE_HEAD
    assert store.address.startswith("postgresql://astra:***@")  # no password in messages
    state_cases.test_inventory_status_history(store)
    state_cases.test_lock(SqlSourceStore(postgres))  # opened again: the same tables


def test_a_plan_and_an_apply_against_a_server_on_postgres_with_the_state_on_postgres(
    postgres, another_postgres, tmp_path
):
    work = tmp_path / "work"
    shutil.copytree(ROOT / "examples" / "laptop", work / "laptop")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASTRA_")}
    env.update(ASTRA_HOME=str(tmp_path / "home"), ASTRA_TOKEN="t", ASTRA_SERVER=f"http://127.0.0.1:{port}")

    def astra(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "reconciler.cli", *args],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )

    def serve() -> subprocess.Popen:
        command = [sys.executable, "-m", "reconciler.cli", "server", "--port", str(port), "--db", postgres]
        proc = subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        until(lambda: proc.poll() is not None or astra("status").returncode == 0, what="the server")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        return proc

    server = serve()
    try:
        state = ["--state", another_postgres, "--source", "laptop"]
        applied = astra("apply", "-f", "laptop", "--yes", "--wait", *state)
        assert applied.returncode == 0, applied.stderr
        assert "Apply complete: 2 created" in applied.stdout
        planned = astra("plan", "-f", "laptop", "--detailed-exitcode", *state)
        assert planned.returncode == 0, planned.stdout + planned.stderr  # nothing to change
        kept = SqlSourceStore(another_postgres).read("laptop").inventory
        assert kept.keys() == {"laptop-gang", "laptop-sweep"}
        assert astra("server", "stop").returncode == 0
        server.wait(timeout=60)
        server = serve()  # the runs are kept in PostgreSQL
        workers = astra("astraeus", "workers", "laptop-sweep")
        assert workers.returncode == 0, workers.stderr
        assert workers.stdout.count("Completed") == 8
    finally:
        astra("server", "stop")
        server.wait(timeout=60)


def test_a_missing_driver_says_which_extra_to_install(monkeypatch, capsys):
    import importlib.util

    from reconciler.cli.app import run

    real = importlib.util.find_spec
    missing = lambda name, *a: None if name == "psycopg" else real(name, *a)  # noqa: E731
    monkeypatch.setattr(importlib.util, "find_spec", missing)
    code = run(["status", "--state", "postgresql://u:secret@db.example/astra", "--server", "slurm://"])
    err = capsys.readouterr().err
    assert code == 1
    assert err == (
        "astra: error: cannot open the state database postgresql://u:***@db.example/astra: PostgreSQL needs "
        "the psycopg driver, which is not installed: pip install 'astra-reconciler[postgres]'\n"
    )
    with pytest.raises(Exception, match=r"pip install 'astra-reconciler\[postgres\]'"):
        Store("postgresql://u:secret@db.example/astra")
