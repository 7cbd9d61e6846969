"""Each inventory entry's digest: computed once when written, kept in ``source_runs``, served beside
the spec; ``GET /sources/{name}/runs`` with ``view=digest``, ``run=`` and ``If-None-Match``; the
upgrade of a schema 3 database, which fills the digests of the rows it holds."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text, update

from reconciler.controlplane.store import SCHEMA_VERSION, SchemaVersion, Store
from reconciler.runspec.normalize import DIGEST_VERSION, digest, normalize, spec_digest

from .test_api import tiny
from .test_sources import entry, locked

#: A spec not of a run's shape (``task_groups`` is no list): normalize keeps what it cannot read as
#: it is, so the entry is kept, with the digest any side makes of it.
MALFORMED = {"metadata": {"name": "m"}, "spec": {"task_groups": 5}}
#: A spec with no canonical JSON (a NaN, which only a store written to directly can hold).
NO_DIGEST = {"metadata": {"name": "m"}, "spec": {"priority": float("nan")}}


def formula(spec: dict) -> str | None:
    return digest(normalize(spec))


def test_every_entry_served_has_the_digest_of_its_normalised_spec(client):
    lock = locked(client)
    big = tiny("a")
    big["spec"]["task_template"]["requested_resources"]["memory_bytes"] = "1Gi"
    client.put("/api/sources/s/runs/a", json={**entry("a"), "spec": big}, headers={"X-Astra-Lock": lock})
    given = {**entry("b"), "digest": "n1:not-mine"}  # a digest sent along is not kept: the server's is
    client.put("/api/sources/s/runs/b", json=given, headers={"X-Astra-Lock": lock})
    client.put(
        "/api/sources/s/runs/m", json={**entry("m"), "spec": MALFORMED}, headers={"X-Astra-Lock": lock}
    )
    items = client.get("/api/sources/s/runs").json()["items"]
    assert {run: e["digest"] for run, e in items.items()} == {
        "a": formula(big),
        "b": formula(tiny("b")),
        "m": formula(MALFORMED),
    }
    assert formula(MALFORMED) is not None
    assert formula(big) is not None and formula(big) == spec_digest({**big, "status": {"x": 1}})
    assert client.get("/api/sources/s").json()["inventory"] == items
    assert client.get("/api/sources").json()["items"][0]["inventory"] == items
    # the last-applied entry's digest is the live run's, so a warm plan compares the two alone
    client.post("/api/runs", json=big)
    (live,) = client.get("/api/runs", params={"view": "summary"}).json()["items"]
    assert live["spec_digest"] == items["a"]["digest"]


def test_a_whole_put_keeps_the_digests_too(client):
    inventory = {"a": entry("a"), "m": {**entry("m"), "spec": MALFORMED}}
    body = client.put("/api/sources/s", json={"resource_version": 0, "inventory": inventory}).json()
    digests = {run: e["digest"] for run, e in body["inventory"].items()}
    assert digests == {"a": formula(tiny("a")), "m": formula(MALFORMED)}


def test_the_digest_view_has_no_spec_and_the_full_view_is_the_default(client):
    lock = locked(client)
    for name, at in (("b", 2.0), ("a", 1.0), ("c", 3.0)):
        client.put(f"/api/sources/s/runs/{name}", json=entry(name, at), headers={"X-Astra-Lock": lock})
    r = client.get("/api/sources/s/runs", params={"view": "digest"})
    assert r.status_code == 200
    assert r.json() == {
        "name": "s",
        "resource_version": 3,
        "items": {
            n: {"digest": formula(tiny(n)), "applied_at": at, "file": f"{n}.yaml"}
            for n, at in (("a", 1.0), ("b", 2.0), ("c", 3.0))
        },
    }
    assert list(r.json()["items"]) == ["a", "b", "c"]  # by run
    assert b'"spec"' not in r.content
    full = client.get("/api/sources/s/runs").json()
    assert client.get("/api/sources/s/runs", params={"view": "full"}).json() == full
    assert {n: {k: v for k, v in e.items() if k != "spec"} for n, e in full["items"].items()} == r.json()[
        "items"
    ]


def test_the_digest_view_follows_every_write(client):
    lock = locked(client)
    headers = {"X-Astra-Lock": lock}
    client.put("/api/sources/s/runs/a", json=entry("a"), headers=headers)
    client.put("/api/sources/s/runs/b", json=entry("b"), headers=headers)
    view = {"view": "digest"}
    assert set(client.get("/api/sources/s/runs", params=view).json()["items"]) == {"a", "b"}
    changed = tiny("a", command="false")
    client.put("/api/sources/s/runs/a", json={**entry("a"), "spec": changed}, headers=headers)
    client.delete("/api/sources/s/runs/b", headers=headers)
    items = client.get("/api/sources/s/runs", params=view).json()["items"]
    assert {n: e["digest"] for n, e in items.items()} == {"a": formula(changed)} != {"a": formula(tiny("a"))}
    whole = {"resource_version": 4, "inventory": {"c": entry("c")}, "lock_id": lock}
    assert client.put("/api/sources/s", json=whole).status_code == 200
    assert client.get("/api/sources/s/runs", params=view).json()["items"] == {
        "c": {"digest": formula(tiny("c")), "applied_at": 1.0, "file": "c.yaml"}
    }


def test_run_names_pick_entries_in_either_view(client):
    lock = locked(client)
    for name in ("a", "b", "c"):
        client.put(f"/api/sources/s/runs/{name}", json=entry(name), headers={"X-Astra-Lock": lock})
    picked = client.get("/api/sources/s/runs", params=[("run", "c"), ("run", "a"), ("run", "nope")]).json()
    assert picked["resource_version"] == 3 and list(picked["items"]) == ["a", "c"]
    assert picked["items"]["a"]["spec"] == tiny("a")
    digests = client.get("/api/sources/s/runs", params=[("run", "b"), ("view", "digest")]).json()["items"]
    assert digests == {"b": {"digest": formula(tiny("b")), "applied_at": 1.0, "file": "b.yaml"}}
    assert client.get("/api/sources/s/runs", params={"run": "nope"}).json()["items"] == {}


@pytest.mark.parametrize("params", [{}, {"view": "digest"}, {"view": "digest", "run": "a"}])
def test_the_runs_read_names_the_source_tag_and_is_304_when_unchanged(client, params):
    lock = locked(client)
    client.put("/api/sources/s/runs/a", json=entry("a"), headers={"X-Astra-Lock": lock})
    tag = client.get("/api/sources/s").headers["etag"]
    first = client.get("/api/sources/s/runs", params=params)
    assert first.status_code == 200 and first.headers["etag"] == tag == '"1-L1"'
    same = client.get("/api/sources/s/runs", params=params, headers={"If-None-Match": f'"0-x", {tag}'})
    assert same.status_code == 304 and same.content == b"" and same.headers["etag"] == tag
    client.put("/api/sources/s/runs/b", json=entry("b"), headers={"X-Astra-Lock": lock})
    after = client.get("/api/sources/s/runs", params=params, headers={"If-None-Match": tag})
    assert after.status_code == 200 and after.headers["etag"] == '"2-L1"'


def test_an_unknown_view_is_422_and_a_source_never_written_404(client):
    bad = client.get("/api/sources/s/runs", params={"view": "summary"})
    assert bad.status_code == 422 and "'digest' or 'full'" in bad.json()["detail"]
    assert client.get("/api/sources/s/runs", params={"view": "digest"}).status_code == 404
    assert client.get("/api/sources/s/runs", headers={"If-None-Match": '"0-"'}).status_code == 404


def test_a_schema_3_database_gets_the_digests_of_its_entries_when_opened(tmp_path):
    url = f"sqlite:///{tmp_path / 'astra.db'}"
    store = Store(url)
    store.put_source("s", {"inventory": {"a": entry("a"), "m": {**entry("m"), "spec": NO_DIGEST}}}, 0, 1.0)
    with store.engine.begin() as conn:  # as schema 3 left it: no digest column, no index over it
        conn.execute(text("DROP INDEX ix_source_runs_digests"))
        conn.execute(text("ALTER TABLE source_runs DROP COLUMN digest"))
        conn.execute(update(SchemaVersion.__table__).values(version=3))
    store.close()
    again = Store(url)
    assert again.schema_version() == SCHEMA_VERSION == 4
    with again.engine.connect() as conn:
        rows = dict(conn.execute(text("SELECT run, digest FROM source_runs ORDER BY run")).all())
        assert "ix_source_runs_digests" in {i["name"] for i in inspect(conn).get_indexes("source_runs")}
    assert rows == {"a": formula(tiny("a")), "m": None}
    found = again.source_runs_json("s", specs=False)
    assert found is not None and f'"a":{{"digest":"{DIGEST_VERSION}:' in found[0] and "spec" not in found[0]
    again.close()
