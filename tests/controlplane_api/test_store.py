"""The store: SQLite in WAL mode, the schema version, batched ticks, recovery after a restart."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import event, text, update

from reconciler.controlplane.store import SCHEMA_VERSION, SchemaTooNew, SchemaVersion, Store
from reconciler.runspec.normalize import spec_digest

from .conftest import SEEDS, until
from .test_api import tiny


def test_sqlite_runs_in_wal_mode_with_full_sync(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'a.db'}")
    with store.engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA synchronous")).scalar() == 2  # FULL
    assert store.schema_version() == SCHEMA_VERSION


def test_a_newer_schema_refuses_to_open(tmp_path):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    store = Store(url)
    with store.engine.begin() as conn:
        conn.execute(update(SchemaVersion.__table__).values(version=SCHEMA_VERSION + 1))
    store.close()
    newer = rf"schema version {SCHEMA_VERSION + 1}, newer than this astra's {SCHEMA_VERSION}: upgrade astra"
    with pytest.raises(SchemaTooNew, match=newer):
        Store(url)


def test_resource_versions_come_from_one_store_counter_so_a_recreated_run_never_reuses_one(client, plane):
    """A plan saved before a delete and re-create under the same name must see that it is stale."""
    first = client.post("/api/runs", json=tiny("a")).json()
    assert first["metadata"]["resource_version"] == 1
    assert client.post("/api/runs", json=tiny("b")).json()["metadata"]["resource_version"] == 2
    doc = {"metadata": first["metadata"], "spec": {**first["spec"], "priority": 5}}
    saved = client.put("/api/runs/a", json=doc).json()["metadata"]["resource_version"]
    assert saved == 3  # the store's next value, not a's own 2
    assert client.delete("/api/runs/a").status_code == 200
    again = client.post("/api/runs", json=tiny("a")).json()["metadata"]["resource_version"]
    assert again == 4 and again != saved
    plane.step()  # the scheduler's changes of state do not take a version
    assert client.get("/api/runs/a").json()["metadata"]["resource_version"] == 4
    assert client.get("/api/runs/b").json()["metadata"]["resource_version"] == 2
    stale = client.put("/api/runs/a", json={**doc, "metadata": {"name": "a", "resource_version": saved}})
    assert stale.status_code == 409 and stale.json()["resource_version"] == 4


def test_a_refused_write_takes_no_resource_version(client):
    client.post("/api/runs", json=tiny("a"))
    assert client.post("/api/runs", json=tiny("a")).status_code == 409
    stale = {**tiny("a"), "metadata": {"name": "a", "resource_version": 7}}
    assert client.put("/api/runs/a", json=stale).status_code == 409
    assert client.post("/api/runs", json=tiny("b")).json()["metadata"]["resource_version"] == 2


def test_the_resource_version_counter_survives_a_restart(plane):
    plane.engine.submit(tiny("a"), plane.clock.now())
    plane.engine.submit(tiny("b"), plane.clock.now())
    plane.engine.delete("b", plane.clock.now())
    assert plane.store.resource_version() == 2
    again = plane.restart()
    assert again.engine.meta["a"].resource_version == 1
    again.engine.submit(tiny("b"), again.clock.now())
    assert again.engine.meta["b"].resource_version == 3
    assert again.store.run_row("b")["resource_version"] == 3
    again.close()


def test_a_schema_1_database_gets_the_counter_above_every_version_it_holds(tmp_path, plane):
    plane.engine.submit(tiny("a"), plane.clock.now())
    with plane.store.engine.begin() as conn:  # as schema 1 left it: no counter, per-run versions
        conn.execute(text("DROP TABLE astra_sequences"))
        conn.execute(update(SchemaVersion.__table__).values(version=1))
        conn.execute(text("UPDATE runs SET resource_version = 7"))
    plane.store.close()
    store = Store(f"sqlite:///{tmp_path / 'astra.db'}")
    assert store.schema_version() == SCHEMA_VERSION == 4
    assert store.resource_version() == 7
    assert store.update_run("a", tiny("a"), 7, 0.0) == 8
    store.close()


def test_reopening_keeps_runs_and_sources(tmp_path, plane, client):
    client.post("/api/runs", json=tiny("a"))
    entry = {"spec": tiny("a"), "applied_at": 1.0, "file": "a.yaml"}
    assert client.put("/api/sources/s", json={"inventory": {"a": entry}}).status_code == 200
    plane.store.close()
    again = Store(f"sqlite:///{tmp_path / 'astra.db'}")
    assert [r["name"] for r in again.run_rows()] == ["a"]
    assert again.get_source("s")["inventory"] == {"a": {**entry, "digest": spec_digest(tiny("a"))}}


def test_a_tick_is_one_transaction_of_bulk_statements(plane):
    """Admitting a 1,000-copy array and placing copies writes a handful of statements, not thousands."""
    doc = json.loads((SEEDS / "sweep.json").read_text())
    doc["spec"]["array"] = {"size": 1000, "max_parallel": 0}
    doc["spec"]["task_template"].update(command="true", args=[])
    plane.engine.submit(doc, plane.clock.now())
    statements, commits = [], []
    event.listen(plane.store.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    event.listen(plane.store.engine, "commit", lambda *a: commits.append(1))
    plane.step()
    assert len(plane.store.worker_rows("sweep")) == 1000
    assert len(commits) == 1
    assert len(statements) < 20


def test_restart_marks_running_workers_lost_and_the_restart_rules_apply(plane):
    doc = tiny("keep", command="exec sleep 300")
    doc["spec"]["task_template"]["restart_policy"] = "OnFailure"
    plane.engine.submit(doc, plane.clock.now())
    until(lambda: plane.worker("keep-0").state == "Running", step=plane.step)
    pid = plane.engine.processes["keep-0"]["pid"]
    again = plane.restart()  # the first executor's processes are gone, as after a crash
    assert again.engine.recovered == ["keep-0"]
    w = again.worker("keep-0")
    assert (w.state, w.reason) == ("Down", "Lost: its process was gone when the control plane restarted")
    again.step()
    w = again.worker("keep-0")
    assert w.state == "Pending" and w.restarts == 1
    assert w.reason == "Lost: its process was gone when the control plane restarted; restart 1 of 10 in 10 s"
    assert again.store.worker_row("keep-0")["restarts"] == 1
    again.clock.advance(10)
    until(lambda: again.worker("keep-0").state == "Running", step=again.step)
    assert again.engine.processes["keep-0"]["pid"] != pid
    again.close()


def test_restart_kills_a_worker_process_that_survived(plane):
    plane.engine.submit(tiny("orphan", command="exec sleep 300"), plane.clock.now())
    until(lambda: plane.worker("orphan-0").state == "Running", step=plane.step)
    proc = plane.executor.running.pop("orphan-0")  # the old server forgets it: a crash
    plane.store.close()
    again = Store(plane.store.url)
    from reconciler.controlplane.engine import Engine
    from reconciler.controlplane.executor import ProcessExecutor
    from reconciler.controlplane.inventory import default_inventory

    engine = Engine(again, default_inventory(), ProcessExecutor(plane.home), plane.clock.now())
    assert engine.state.workers["orphan-0"].reason == (
        "Lost: its process was stopped when the control plane restarted"
    )
    assert proc.popen.wait(timeout=30) == -9
    again.close()
