"""Source stores: SQL (sqlmodel's engine, SQLite here) and memory behave alike; naming a source."""

from __future__ import annotations

import subprocess

import pytest

from reconciler.state import (
    HistoryEntry,
    InventoryEntry,
    Locked,
    MemorySourceStore,
    SqlSourceStore,
    StateError,
    default_source_name,
    open_store,
)


@pytest.fixture(params=["sql", "memory"])
def store(request, tmp_path):
    if request.param == "sql":
        return SqlSourceStore(f"sqlite:///{tmp_path / 'state.db'}")
    return MemorySourceStore()


def test_inventory_status_history(store):
    assert store.read("s").inventory == {}
    store.record("s", "b", InventoryEntry({"spec": {"x": 1}}, 2.0, "b.yaml"))
    store.record("s", "a", InventoryEntry({"spec": {}}, 1.0, None))
    store.record("s", "b", InventoryEntry({"spec": {"x": 2}}, 3.0, "b.yaml"))
    store.record("s", "a", None)
    store.set_status("s", {"state": "Ready", "reason": "ReconciliationSucceeded"})
    store.add_history("s", HistoryEntry("me", 4.0, "abc", {"create": 1}, "applied"))
    state = store.read("s")
    assert list(state.inventory) == ["b"] and state.inventory["b"].spec == {"spec": {"x": 2}}
    assert state.status["state"] == "Ready"
    assert state.history == [HistoryEntry("me", 4.0, "abc", {"create": 1}, "applied")]
    assert state.resource_version == 6
    assert [s.name for s in store.sources()] == ["s"]


def test_lock(store):
    lock = store.lock("s", "me@h:1", 10.0)
    with pytest.raises(Locked) as held:
        store.lock("s", "you@h:2", 70.0)
    assert held.value.lock == lock and "1m ago" in str(held.value)
    assert store.read("s").lock == lock
    with pytest.raises(StateError):
        store.unlock("s", "not-it")
    store.unlock("s", lock.id)
    assert store.read("s").lock is None
    with pytest.raises(StateError, match="holds no lock"):
        store.unlock("s", lock.id)


def test_sql_state_survives_reopening(tmp_path):
    url = f"sqlite:///{tmp_path / 'deep' / 'state.db'}"
    SqlSourceStore(url).record("s", "r", InventoryEntry({"a": 1}, 1.0))
    assert SqlSourceStore(url).read("s").inventory["r"].spec == {"a": 1}


def test_open_store_prefers_state_then_cluster(tmp_path, monkeypatch):
    monkeypatch.setenv("ASTRA_HOME", str(tmp_path / "home"))
    from reconciler.clusters.fake import FakeCluster

    fake = FakeCluster()
    assert open_store(None, fake) is fake.source_store()
    assert isinstance(open_store(f"sqlite:///{tmp_path / 'x.db'}", fake), SqlSourceStore)
    default = open_store(None, object())
    assert default.address == f"sqlite:///{tmp_path / 'home' / 'state.db'}"


def test_default_source_name(tmp_path):
    folder = tmp_path / "repo" / "runs"
    folder.mkdir(parents=True)
    assert default_source_name([folder]) == str(folder)
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "remote", "add", "origin", "https://example.com/acme/runs.git"], check=True
    )
    assert default_source_name([folder / "x.yaml"]) == "https://example.com/acme/runs.git//runs"
    assert default_source_name([repo]) == "https://example.com/acme/runs.git"
