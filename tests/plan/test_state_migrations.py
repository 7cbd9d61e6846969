"""The source state database's schema by alembic: files written by earlier astras open, losing nothing.

The fixtures under ``tests/fixtures/`` were written by astra itself at older commits
(``tests/fixtures/legacy_dbs.py`` says how): ``state-d65e8ab.db`` by d65e8ab (the last before
alembic), ``state-nodigest.db`` by 47bcd04 (before inventory digests), with the same content.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text

from reconciler.migrate import script_revisions
from reconciler.runspec.normalize import spec_digest
from reconciler.state import HistoryEntry, Lock, SqlSourceStore, StateError, StateTooNew
from reconciler.state.migrations import BASELINE, HEAD, REVISIONS
from reconciler.state.sql import metadata

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
T0 = 1_700_000_000.0


def copied(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    shutil.copy(FIXTURES / name, path)
    return path


def raw(path: Path) -> dict[str, list[tuple]]:
    """Every row of every table, read with sqlite3 alone (no astra code)."""
    with sqlite3.connect(path) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: sorted(conn.execute(f'SELECT * FROM "{n}"').fetchall(), key=repr) for n in names}


def revision_of(store: SqlSourceStore) -> str:
    with store.engine.connect() as conn:
        return conn.execute(text(f"SELECT version_num FROM {REVISIONS.version_table}")).scalar_one()


def test_a_state_file_written_by_d65e8ab_is_adopted_and_loses_nothing(tmp_path):
    path = copied(tmp_path, "state-d65e8ab.db")
    before = raw(path)
    store = SqlSourceStore(f"sqlite:///{path}")
    assert revision_of(store) == HEAD
    after = raw(path)
    assert set(after) == {*before, REVISIONS.version_table}
    for table, rows in before.items():  # every value kept; a later revision's columns come after, empty
        width = len(rows[0]) if rows else 0
        assert [row[:width] for row in after[table]] == rows, table
        assert all(value is None for row in after[table] for value in row[width:]), table
    state = store.read("s")
    assert state.resource_version == 7  # four inventory writes, a status, two records (a lock is none)
    assert {run: (e.applied_at, e.file) for run, e in state.inventory.items()} == {
        "done": (T0 + 1.0, "runs/done.yaml"),
        "sweep": (T0 + 2.0, None),
    }
    assert state.inventory["sweep"].spec["spec"]["priority"] == 2
    assert {run: e.digest for run, e in state.inventory.items()} == {
        run: spec_digest(e.spec) for run, e in state.inventory.items()
    }
    assert state.status == {"state": "Ready", "reason": "ReconciliationSucceeded", "revision": "sha256:1"}
    assert state.history == [
        HistoryEntry("me@host:1", T0 + 3.0, "abc123", {"create": 3}, "applied"),
        HistoryEntry("me@host:1", T0 + 4.0, None, {"delete": 1}, "failed: boom"),
    ]
    assert state.lock == Lock("000000000000", "me@host:2", T0 + 5.0)  # the first fixed uuid, cut to 12
    assert [s.name for s in store.sources()] == ["other", "s"]
    assert store.inventory("other", specs=False)["x"].digest is not None


def test_a_state_file_from_before_digests_gets_them_and_answers_as_the_other(tmp_path):
    old = SqlSourceStore(f"sqlite:///{copied(tmp_path, 'state-nodigest.db')}")
    new = SqlSourceStore(f"sqlite:///{copied(tmp_path, 'state-d65e8ab.db')}")
    assert revision_of(old) == HEAD
    assert old.sources() == new.sources()
    assert old.inventory("s", specs=False) == new.inventory("s", specs=False)


def test_a_revision_this_astra_does_not_know_refuses_to_open_and_changes_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    store = SqlSourceStore(url)
    with store.engine.begin() as conn:
        conn.execute(text(f"UPDATE {REVISIONS.version_table} SET version_num = '0099_from_the_future'"))
    store.engine.dispose()
    before = raw(tmp_path / "state.db")
    message = (
        r"is at schema revision 0099_from_the_future, which this astra does not know .*a newer astra "
        r"wrote it; upgrade astra, or give another --state"
    )
    with pytest.raises(StateTooNew, match=message):
        SqlSourceStore(url)
    assert raw(tmp_path / "state.db") == before
    assert issubclass(StateTooNew, StateError)  # the CLI's one line for every StateError


def test_the_revisions_build_the_tables_the_models_declare(tmp_path):
    opts = {"version_table": REVISIONS.version_table}
    for store in (
        SqlSourceStore(f"sqlite:///{tmp_path / 'new.db'}"),
        SqlSourceStore(f"sqlite:///{copied(tmp_path, 'state-d65e8ab.db')}"),
        SqlSourceStore(f"sqlite:///{copied(tmp_path, 'state-nodigest.db')}"),
    ):
        with store.engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn, opts=opts), metadata) == [], (
                store.address
            )


def test_head_is_the_newest_script_and_the_baseline_the_oldest():
    revisions = script_revisions(REVISIONS)
    assert (revisions[0], revisions[-1]) == (HEAD, BASELINE)


def test_the_plan_s_path_loads_no_alembic_and_no_sqlalchemy_it_does_not_need(tmp_path):
    """``reconciler.state`` alone loads no SQLAlchemy; opening a state file at the head, no alembic."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    SqlSourceStore(url).engine.dispose()
    code = (
        "import sys; import reconciler.state as s; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'sqlalchemy', 'sqlmodel', 'alembic'})); "
        f"s.SqlSourceStore({url!r}).read('s'); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'sqlalchemy', 'sqlmodel', 'alembic'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:2] == ["[]", "['sqlalchemy', 'sqlmodel']"]
