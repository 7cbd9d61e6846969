"""The store's schema by alembic: databases written by earlier astras open and lose nothing.

The fixtures under ``tests/fixtures/`` were written by astra itself at older commits
(``tests/fixtures/legacy_dbs.py`` says how): ``store-schema4.db`` by d65e8ab (schema 4, the last
before alembic), ``store-schema3.db`` by 31d9953 (schema 3: no inventory digests), with the same
content, and ``store-schema2.db`` by c62e8bc (schema 2: each source one JSON object, written whole).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text

from reconciler.controlplane.store import SCHEMA_VERSION, SchemaTooNew, Store, StoreError
from reconciler.controlplane.store.mapping import RUN_FIELDS, WORKER_FIELDS
from reconciler.controlplane.store.migrations import BASELINE, HEAD, REVISIONS
from reconciler.controlplane.store.tables import RunRow, WorkerRow, metadata
from reconciler.migrate import MigrationError, script_revisions, upgrade
from reconciler.runspec.normalize import DIGEST_VERSION, spec_digest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SOURCE = "https://example.com/runs.git//runs"
OPTS = {"version_table": REVISIONS.version_table}


def copied(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    shutil.copy(FIXTURES / name, path)
    return path


def raw(path: Path) -> dict[str, list[tuple]]:
    """Every row of every table, read with sqlite3 alone (no astra code)."""
    with sqlite3.connect(path) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: sorted(conn.execute(f'SELECT * FROM "{n}"').fetchall(), key=repr) for n in names}


def served(store: Store) -> dict:
    """What the store answers about everything it holds."""
    return {
        "runs": store.run_rows(),
        "workers": store.worker_rows(),
        "events": {r["name"]: store.event_rows(r["name"]) for r in store.run_rows()},
        "machines": store.machine_rows(),
        "sources": store.list_sources(),
        "digests": store.source_runs_json(SOURCE, specs=False),
        "resource_version": store.resource_version(),
    }


def test_a_database_written_by_d65e8ab_is_adopted_and_loses_nothing(tmp_path):
    path = copied(tmp_path, "store-schema4.db")
    before = raw(path)
    store = Store(f"sqlite:///{path}")
    assert (store.revision(), store.schema_version()) == (HEAD, SCHEMA_VERSION)
    after = raw(path)
    # every table kept, and the later revisions' own added (0003_teams: orgs, workspaces, tokens,
    # …; 0004_drives: drives; 0005_restart_reason: workers.restart_reason; 0006_secrets: secrets;
    # 0007_gpu_holds: gpu_holds, gpu_budgets)
    assert set(before) <= set(after) == {*metadata.tables, REVISIONS.version_table}
    for table, rows in before.items():
        if table == "source_runs":  # its digests, of an older normalize, are made again (0002_digests_n2)
            assert [r[:-1] for r in after[table]] == [r[:-1] for r in rows]
            assert all(r[-1].startswith(f"{DIGEST_VERSION}:") for r in after[table])
            continue
        if table == "workers":  # 0005_restart_reason's column, last: none restarted yet said why
            assert [r[:-1] for r in after[table]] == rows and all(r[-1] is None for r in after[table])
            continue
        assert after[table] == rows, table
    runs = {r["name"]: r for r in store.run_rows()}
    assert {n: (r["resource_version"], r["state"]) for n, r in runs.items()} == {
        "done": (1, "Completed"),
        "sweep": (2, "Completed"),
        "waits": (5, "Running"),
    }
    assert '"priority":5' in runs["waits"]["document"]
    assert [w["name"] for w in store.worker_rows()] == ["done-0", "sweep-0", "sweep-1", "sweep-2", "waits-0"]
    assert len(store.event_rows("sweep")) > 3 and store.event_rows("gone")  # a deleted run's events stay
    assert [m["name"] for m in store.machine_rows()] == ["cpu-01", "gpu-01"]
    source = store.get_source(SOURCE)
    assert source["resource_version"] == 3 and source["lock"]["id"] == "L1" and source["note"] == "kept"
    assert {run: e["digest"] for run, e in source["inventory"].items()} == {
        run: spec_digest(e["spec"]) for run, e in source["inventory"].items()
    }
    assert [h["summary"] for h in source["history"]] == [{"create": 2}, {"update": 1}]
    assert store.get_source("/home/me/runs")["status"] == {"state": "Stalled", "reason": "LoadFailed"}
    runs_, workers, _ = store.load()  # the scheduler's records, as the engine reads them at start
    assert [r.name for r in runs_] == ["done", "sweep", "waits"] and len(workers) == 5
    assert store.resource_version() == 5
    assert store.update_run("waits", {"metadata": {"name": "waits"}, "spec": {}}, 5, 0.0) == 6
    store.close()


def test_a_schema_3_database_is_brought_to_schema_4_and_then_to_the_head(tmp_path):
    """Written by 31d9953 (no digests) with the same content: after opening, it answers as the other."""
    old = Store(f"sqlite:///{copied(tmp_path, 'store-schema3.db')}")
    new = Store(f"sqlite:///{copied(tmp_path, 'store-schema4.db')}")
    assert old.revision() == HEAD and old.schema_version() == SCHEMA_VERSION
    assert served(old) == served(new)
    with old.engine.connect() as conn:  # each digest computed once, at the upgrade
        assert conn.execute(text("SELECT count(*) FROM source_runs WHERE digest IS NULL")).scalar() == 0


def test_a_schema_2_database_s_sources_become_rows_and_lose_nothing(tmp_path):
    """Written by c62e8bc: each source one JSON object, written whole (so once, at resource_version 1)."""
    old = served(Store(f"sqlite:///{copied(tmp_path, 'store-schema2.db')}"))
    new = served(Store(f"sqlite:///{copied(tmp_path, 'store-schema4.db')}"))
    assert {k: v for k, v in old.items() if k not in ("sources", "digests")} == {
        k: v for k, v in new.items() if k not in ("sources", "digests")
    }
    assert [s["resource_version"] for s in old["sources"]] == [1, 1]
    assert [{**s, "resource_version": 1} for s in old["sources"]] == [
        {**s, "resource_version": 1} for s in new["sources"]
    ]
    assert json.loads(old["digests"][0])["items"] == json.loads(new["digests"][0])["items"]


def test_a_revision_this_astra_does_not_know_refuses_to_open_and_changes_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    store = Store(url)
    with store.engine.begin() as conn:
        conn.execute(text(f"UPDATE {REVISIONS.version_table} SET version_num = '0099_from_the_future'"))
    store.close()
    before = raw(tmp_path / "a.db")
    message = (
        r"is at schema revision 0099_from_the_future, which this astra does not know .*a newer astra "
        r"wrote it; upgrade astra, or give another --db"
    )
    with pytest.raises(SchemaTooNew, match=message):
        Store(url)
    assert raw(tmp_path / "a.db") == before


def test_a_migration_that_fails_is_a_store_error_and_the_next_open_finishes_it(tmp_path):
    path = copied(tmp_path, "store-schema3.db")
    refuse = "CREATE TRIGGER refuse BEFORE UPDATE ON astra_schema BEGIN SELECT RAISE(ABORT, 'no'); END"
    with sqlite3.connect(path) as conn:
        conn.execute(refuse)
    with pytest.raises(StoreError, match=r"cannot open the database .*IntegrityError\) no\n"):
        Store(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM astra_schema").fetchall() == [(3,)]
        conn.execute("DROP TRIGGER refuse")
    again = Store(f"sqlite:///{path}")
    assert served(again) == served(Store(f"sqlite:///{copied(tmp_path, 'store-schema4.db')}"))


def test_alembic_s_own_errors_leave_as_migration_errors(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'a.db'}")
    with store.engine.begin() as conn, pytest.raises(MigrationError, match="cannot migrate the database"):
        upgrade(conn, REVISIONS, "0099_no_such_revision")


def test_the_revisions_build_the_tables_the_models_declare(tmp_path):
    for store in (
        Store(f"sqlite:///{tmp_path / 'new.db'}"),
        Store(f"sqlite:///{copied(tmp_path, 'store-schema4.db')}"),
        Store(f"sqlite:///{copied(tmp_path, 'store-schema3.db')}"),
        Store(f"sqlite:///{copied(tmp_path, 'store-schema2.db')}"),
    ):
        with store.engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn, opts=OPTS), metadata) == [], store.url


def test_head_is_the_newest_script_and_the_baseline_the_oldest():
    revisions = script_revisions(REVISIONS)
    assert (revisions[0], revisions[-1]) == (HEAD, BASELINE)


def test_opening_a_database_at_the_head_loads_no_alembic(tmp_path):
    """The fast path of every open (the server's start, a test's store): one SELECT, no alembic."""
    url = f"sqlite:///{tmp_path / 'a.db'}"
    Store(url).close()
    code = (
        "import sys; from reconciler.controlplane.store import Store; "
        f"Store({url!r}).close(); print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_each_field_of_the_scheduler_s_records_has_its_column():
    """The fields a row takes from its record are the record's own (not a list kept beside it)."""
    assert set(RUN_FIELDS) <= set(RunRow.__table__.c.keys())
    assert set(WORKER_FIELDS) <= set(WorkerRow.__table__.c.keys())
    assert {"state", "reason", "restarts", "first_failure"} <= set(RUN_FIELDS)
    assert {"state", "machine", "attempts", "settled"} <= set(WORKER_FIELDS)
