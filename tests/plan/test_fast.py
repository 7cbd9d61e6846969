"""The plan's fast path: the canonical digest of a normalised document, and plans by digest that
are the plans by comparison (every scenario of ``World.plan`` checks the second; this file the first,
and that the fast path is taken)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import cores
from reconciler.clusters.base import RunSummary, summaries
from reconciler.load import cache as cache_module
from reconciler.load import documents, load_source
from reconciler.load import parallel as parallel_module
from reconciler.load import reread as documents_module
from reconciler.load import source as source_module
from reconciler.plan import build, compare, normalize
from reconciler.reconcile import make_plan
from reconciler.runspec.normalize import DIGEST_VERSION, digest, spec_digest
from reconciler.state import InventoryEntry, MemorySourceStore, SqlSourceStore

from .conftest import RUN, as_json


def doc(**spec):
    return {"metadata": {"name": "r"}, "spec": {"task_template": {"image": "i"}, **spec}}


# ---- the digest ----------------------------------------------------------------------------------


def test_digest_is_of_the_normalised_canonical_json():
    n = normalize(doc(priority=3))
    text = json.dumps(n, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert digest(n).startswith(f"{DIGEST_VERSION}:")
    assert digest(n) == spec_digest(doc(priority=3))
    assert digest(n) == digest(json.loads(text))  # the same after a trip through JSON
    assert digest(dict(reversed(list(n.items())))) == digest(n)  # key order is not part of it


def test_same_meaning_same_digest_and_no_field_change():
    a = doc(task_template={"image": "i", "requested_resources": {"memory_bytes": "1Gi"}}, policy="Gang")
    b = doc(
        lifetime="Batch",
        start="Gang",
        task_template={
            "image": "i",
            "restart_policy": "OnFailure",
            "requested_resources": {"memory_bytes": 1073741824.0},
        },
    )
    b["status"] = {"state": "Running"}
    b["metadata"]["resource_version"] = 7
    assert spec_digest(a) == spec_digest(b)
    assert compare(normalize(a), normalize(b), normalize(a))[1] == []


@pytest.mark.parametrize(
    "x, y",
    [
        (1, True),
        (1, "1"),
        (0, False),
        (None, 0),
        ([], {}),
        ([1, 2], [2, 1]),
        (1.5, "1.5"),
    ],
)
def test_values_that_compare_tells_apart_have_other_digests(x, y):
    a, b = normalize(doc(priority=x)), normalize(doc(priority=y))
    assert compare(a, b, a)[1] != [] or compare(b, a, b)[1] != []
    assert digest(a) != digest(b)


@pytest.mark.parametrize(
    "bad",
    [math.nan, math.inf, {1: "a"}, (1, 2), object()],
    ids=["nan", "inf", "int-key", "tuple", "object"],
)
def test_no_canonical_form_no_digest(bad):
    n = normalize(doc())
    n["spec"]["x"] = bad
    assert digest(n) is None  # never "unchanged": the fast path compares such a run in full


@pytest.mark.parametrize("bad", [{1: "a"}, (1, 2)], ids=["int-key", "tuple"])
def test_what_only_a_read_back_would_catch_never_passes_validation(bad):
    """A load digests a valid document without reading it back (``plain=True``): the two cases
    that need the read back are refused by validate_data, and the digests of the rest agree."""
    from reconciler.runspec.validate import validate_data

    assert validate_data({**doc(), "metadata": {"name": "r", "labels": {"k": bad}}}) != []
    n = normalize(doc(priority=3))
    assert digest(n, plain=True) == digest(n) is not None


json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False)
    | st.text(max_size=4)
)
json_tree = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=4), json_tree, max_size=4), json_tree)
def test_equal_digests_mean_compare_finds_nothing(spec, other):
    """By construction: equal digests are equal canonical JSON, which compare reads as equal."""
    a = normalize({"metadata": {"name": "r"}, "spec": spec})
    b = json.loads(json.dumps(a))  # what the other side holds: the same document through JSON
    assert digest(a) == digest(b)
    before, fields = compare(a, b, a)
    assert fields == [] and json.dumps(before, sort_keys=True) == json.dumps(a, sort_keys=True)
    c = normalize({"metadata": {"name": "r"}, "spec": {**spec, "zz": other}})
    if digest(c) == digest(a):
        assert compare(a, c, a)[1] == []


SEEDS = Path(__file__).resolve().parents[2] / "docs" / "seeds"


def test_examples_digest_alike_from_yaml_and_json():
    """The seeds' YAML and JSON forms of one run are one document: one digest."""
    loaded = load_source([str(SEEDS)])  # each name twice: a clash, but every file loads
    by_name: dict[str, set[str]] = {}
    for f in loaded.files.values():
        for run in f.runs:
            assert run.digest == spec_digest(run.document)
            by_name.setdefault(run.name, set()).add(run.digest)
    assert len(by_name) == 2 and all(len(d) == 1 for d in by_name.values())


# ---- the fast path is taken, and gives the slow path's plan -----------------------------------

#: what the fake cluster fills in when left out (a cluster default): said in the files, so that
#: the live document is the desired one and the digests can agree (the Astraeus API keeps a
#: document as given: there, they agree without it)
EXPLICIT = "  start: Gang\n  on_failure: RestartJob\n"


def explicit_run(world, name: str, image: str = "python:3.12") -> None:
    world.write(f"{name}.yaml", RUN.format(name=name, image=image, gpus=1) + EXPLICIT)


def test_a_warm_plan_of_an_unchanged_source_compares_nothing(world, monkeypatch):
    for i in range(5):
        explicit_run(world, f"r{i}")
    world.converge()
    calls = []
    real = build.compare
    monkeypatch.setattr(build, "compare", lambda *a: calls.append(a[0]) or real(*a))
    read_documents, inventory_reads = [], []
    real_reload = documents_module._reload
    monkeypatch.setattr(
        documents_module,
        "_reload",
        lambda loaded, path: read_documents.append(path) or real_reload(loaded, path),
    )
    real_inventory = world.store.inventory
    monkeypatch.setattr(
        world.store, "inventory", lambda *a, **k: inventory_reads.append((a, k)) or real_inventory(*a, **k)
    )
    source = world.source()
    loaded = load_source(source.paths, cache=world.cache)  # from the cache: digests kept
    world.cluster.calls.clear()
    fast = make_plan(source, loaded, world.cluster, world.store, world.now, fast=True)
    assert calls == [] and not fast.has_changes
    assert not [c for c in world.cluster.calls if c[0] in ("get", "workers")]
    # no document was read: not one from the files (the cache), nor one last-applied spec
    assert read_documents == [] and inventory_reads == [(("test",), {"specs": False})]
    assert all(c.before is None and c.after is None for c in fast.changes)
    slow = make_plan(source, loaded, world.cluster, world.store, world.now, fast=False)
    assert len(calls) == 5 and as_json(fast) == as_json(slow)
    assert len(read_documents) == 5 and all(r.digest and r.document is None for r in loaded.runs.values())


def test_an_unchanged_run_moved_to_another_file_is_a_noop_that_records_its_new_file(world):
    for i in range(3):
        explicit_run(world, f"r{i}")
    world.converge()
    moved = world.write("moved/r1.yaml", Path("runs/r1.yaml").read_text())
    Path("runs/r1.yaml").unlink()
    plan = world.plan()  # the fast path's plan is the slow path's (``World.plan``)
    assert not plan.has_changes
    by_name = {c.address: c for c in plan.changes}
    assert by_name["r1"].file == str(moved)
    assert by_name["r1"].after is not None  # its noop carries the document: apply records the file
    assert by_name["r0"].after is None and by_name["r2"].after is None  # nothing to record
    assert world.apply(plan).ok
    assert world.store.inventory("test")["r1"].file == str(moved)


def test_only_the_runs_that_differ_are_fetched_and_compared(world, monkeypatch):
    for i in range(4):
        explicit_run(world, f"r{i}")
    world.converge()
    explicit_run(world, "r2", image="python:3.13")
    calls = []
    real = build.compare
    monkeypatch.setattr(build, "compare", lambda *a: calls.append(a[0]["metadata"]["name"]) or real(*a))
    world.cluster.calls.clear()
    source = world.source()
    loaded = load_source(source.paths, cache=world.cache)
    plan = make_plan(source, loaded, world.cluster, world.store, world.now, fast=True)
    assert calls == ["r2"]
    assert [c for c in world.cluster.calls if c[0] == "get"] == [("get", "r2")]
    assert [c.address for c in plan.changes if c.action.value != "noop"] == ["r2"]


def test_summaries_of_a_cluster_without_the_fast_call_come_from_list_runs(world):
    world.run("a")
    world.converge()
    (s,) = summaries(world.cluster)
    live = world.cluster.get_run("a")
    assert s == RunSummary.of(live)
    assert s.spec_digest == spec_digest(live.document) is not None
    assert (s.name, s.resource_version, s.state, s.final) == (
        live.name,
        live.resource_version,
        live.state,
        live.final,
    )


@pytest.mark.parametrize("kind", ["memory", "sql"])
def test_a_store_reads_the_inventory_with_digests_and_without_specs(kind, tmp_path):
    store = MemorySourceStore() if kind == "memory" else SqlSourceStore(f"sqlite:///{tmp_path}/state.db")
    specs = {"a": normalize(doc(priority=1)), "b": normalize(doc(priority=2))}
    for run, spec in specs.items():
        store.record("s", run, InventoryEntry(spec, 5.0, f"{run}.yaml"))
    bare = store.inventory("s", specs=False)
    assert {r: (e.spec, e.digest, e.file) for r, e in bare.items()} == {
        r: (None, digest(spec), f"{r}.yaml") for r, spec in specs.items()
    }
    assert store.inventory("s", ["b", "zzz"]) == {
        "b": InventoryEntry(specs["b"], 5.0, "b.yaml", digest(specs["b"]))
    }
    assert store.inventory("s") == store.read("s").inventory
    assert store.inventory("never-written", specs=False) == {}


def test_a_state_file_from_before_digests_gets_them(tmp_path):
    import sqlalchemy

    url = f"sqlite:///{tmp_path}/state.db"
    engine = sqlalchemy.create_engine(url)
    spec = normalize(doc(priority=3))
    with engine.begin() as conn:  # the table as astra wrote it before digests
        conn.exec_driver_sql(
            "CREATE TABLE astra_inventory (source VARCHAR NOT NULL, run VARCHAR NOT NULL, spec TEXT NOT NULL,"
            " applied_at FLOAT NOT NULL, file VARCHAR, PRIMARY KEY (source, run))"
        )
        conn.exec_driver_sql(
            "INSERT INTO astra_inventory VALUES ('s', 'r', ?, 1.0, 'r.yaml')", (json.dumps(spec),)
        )
    store = SqlSourceStore(url)
    assert store.inventory("s", specs=False)["r"].digest == digest(spec)
    store.record("s", "q", InventoryEntry(spec, 2.0, "q.yaml"))
    assert store.inventory("s", ["q"])["q"].digest == digest(spec)


@pytest.mark.parametrize("chunk", [parallel_module.CHUNK, 2], ids=["one chunk a share", "chunks of 2"])
def test_a_cold_load_on_every_core_is_the_load_in_one_process(world, monkeypatch, chunk):
    """The same files, runs, digests, problems and cache entries, whether each share loads its
    files at once or a few at a time (a share at 100,000 files goes ``CHUNK`` at a time)."""
    from reconciler.load import FileCache

    monkeypatch.setattr(parallel_module, "CHUNK", chunk)

    for i in range(7):
        world.run(f"r{i}")
    world.write("bad.yaml", "metadata: {name: bad}\nspec: {task_template: {image: 1}}\n")
    alone = load_source(["runs"], cache=FileCache(None))
    _cold_on_two_cores(monkeypatch)  # two shares, whatever this machine has
    forked = load_source(["runs"], cache=FileCache(world.root / "cold"))
    assert forked.taken == {"shares": 7, "here": 1} and alone.taken == {"here": 8}
    assert [str(e) for e in forked.errors] == [str(e) for e in alone.errors] != []
    assert forked.hashes() == alone.hashes()
    for name, f in alone.files.items():
        g = forked.files[name]
        assert [(i, r.name, r.digest) for i, r in g.entries] == [(i, r.name, r.digest) for i, r in f.entries]
    packs = list((world.root / "cold" / "packs").glob("*.json"))
    assert len({p.name.split("-")[0] for p in packs}) == 1  # a part from each share that took files: one pack
    entries = [e for p in packs for e in json.loads(p.read_text())["entries"]]
    assert len(entries) == 7  # each file once; the bad file is never cached


def test_a_cold_plan_reads_the_cluster_apart_while_other_cores_load_its_files(world, monkeypatch):
    """With a cluster and a store that can be read from a forked process, a cold plan of many
    files reads them there (``readahead``) while the files load on every core here: nothing is
    listed in this process, and the plan is the one made after the load."""
    from reconciler import readahead, reconcile

    for i in range(6):
        world.run(f"r{i}")
    world.converge()
    world.run("r0", image="python:3.13")  # one change, so that the plan is not all no-ops
    _cold_on_two_cores(monkeypatch)
    monkeypatch.setattr(readahead, "reads_apart", lambda cluster, store: True)  # the fake is memory
    monkeypatch.setattr(readahead, "forkable", lambda n, minimum: n >= 2)
    listed_here = []
    real_summaries = reconcile.summaries
    monkeypatch.setattr(reconcile, "summaries", lambda c: listed_here.append(1) or real_summaries(c))
    source = world.source()
    loaded, ahead = reconcile.load_and_plan(source, world.cluster, world.store, world.now, cache=world.cache)
    assert listed_here == [] and loaded.taken == {"shares": 6}
    after = load_source(source.paths, cache=world.cache)
    plain = make_plan(source, after, world.cluster, world.store, world.now)
    assert as_json(ahead) == as_json(reconcile.with_revision(plain, None, after))
    assert listed_here == [1]
    assert [c.action.value for c in ahead.changes if c.action.value != "noop"] == ["replace"]


def test_a_cold_load_on_every_core_keeps_digests_and_reads_back_what_a_plan_needs(world, monkeypatch):
    """A cold load on every core keeps no document, this process's share neither (100,000
    unchanged runs would hold them all): the documents a plan needs are read back from their
    files, each file once, and are those of a load in one process."""
    from reconciler.load import FileCache

    for i in range(6):
        world.run(f"r{i}")
    alone = load_source(["runs"], cache=FileCache(None))
    _cold_on_two_cores(monkeypatch)
    monkeypatch.setattr(cores, "cores", lambda: 1)  # one share, in this process
    monkeypatch.setattr(parallel_module, "CHUNK", 2)
    loaded = load_source(["runs"], cache=FileCache(world.root / "c"))
    assert loaded.taken == {"shares": 6}
    assert [n for n, r in loaded.runs.items() if r.document is not None] == []
    reads = []
    reload = documents_module._reload
    monkeypatch.setattr(
        documents_module, "_reload", lambda loaded, path: reads.append(path) or reload(loaded, path)
    )
    read = documents(loaded, {"r0", "r4"})
    assert reads == [os.path.join("runs", "r0.yaml"), os.path.join("runs", "r4.yaml")]
    for name in ("r0", "r4"):
        assert (read[name].document, read[name].after(), read[name].digest) == (
            alone.runs[name].document,
            alone.runs[name].after(),
            alone.runs[name].digest,
        )


def _cold_on_two_cores(monkeypatch) -> None:
    monkeypatch.setattr(parallel_module, "PARALLEL_FROM", 2)
    monkeypatch.setattr(source_module, "forkable", lambda n, minimum: n >= 2)
    monkeypatch.setattr(cores, "cores", lambda: 2)


def test_a_read_ahead_that_fails_for_a_moment_is_retried_where_it_is_read(world, monkeypatch):
    from reconciler import reconcile
    from reconciler.clusters.base import Unreachable

    for i in range(4):
        world.run(f"r{i}")
    world.converge()
    _cold_on_two_cores(monkeypatch)
    real, failures = world.cluster.list_runs, [1]

    def flaky():
        if failures:
            failures.pop()
            raise Unreachable("the server went away for a moment")
        return real()

    monkeypatch.setattr(world.cluster, "list_runs", flaky)
    cluster = reconcile.retrying(world.cluster)
    made = reconcile.plan_source(world.source(), cluster, world.store, world.now, cache=world.cache)
    assert failures == [] and {c.action.value for c in made.changes} == {"noop"}


def test_a_read_ahead_that_fails_for_good_is_the_plans_error_and_is_not_read_again(world, monkeypatch):
    from reconciler import reconcile
    from reconciler.clusters.base import Unreachable

    for i in range(4):
        world.run(f"r{i}")
    world.converge()
    _cold_on_two_cores(monkeypatch)
    calls = []

    def gone():
        calls.append(1)
        raise Unreachable("fake://test cannot be reached")

    monkeypatch.setattr(world.cluster, "list_runs", gone)
    cluster = reconcile.retrying(world.cluster)
    with pytest.raises(Unreachable, match="cannot be reached"):
        reconcile.plan_source(world.source(), cluster, world.store, world.now, cache=world.cache)
    assert len(calls) == 1 + 3  # the call and its retries (3 in tests), once: not again after the load

    world.write("r0.yaml", "metadata: {name: r0}\nspec: {task_template: {image: 1}}\n")
    with pytest.raises(reconcile.LoadFailed):  # a file that fails is said first
        reconcile.plan_source(world.source(), cluster, world.store, world.now, cache=world.cache)


def test_a_load_forgets_the_stat_of_a_file_deleted_since(world, monkeypatch):
    from reconciler import hashes
    from reconciler.load import FileCache

    real_clock = hashes.time.time_ns
    monkeypatch.setattr(hashes.time, "time_ns", lambda: real_clock() + 2 * hashes.RACY_NS)  # settled
    for i in range(3):
        world.run(f"r{i}")
    load_source(["runs"], cache=FileCache(world.root / "c"))
    stat_file = world.root / "c" / "stat.json"
    assert len(json.loads(stat_file.read_text())["files"]) == 3
    (world.root / "runs" / "r1.yaml").unlink()
    again = load_source(["runs"], cache=FileCache(world.root / "c"))
    assert sorted(again.runs) == ["r0", "r2"]
    held = json.loads(stat_file.read_text())["files"]
    assert sorted(os.path.basename(k) for k in held) == ["r0.yaml", "r2.yaml"]


def test_only_the_newest_packs_are_kept_each_with_all_its_parts(tmp_path):
    from reconciler.load import FileCache

    cache = FileCache(tmp_path)
    for generation in ("0000000000000001", "0000000000000002", "0000000000000003"):
        for part in (0, 1):
            assert cache.put_part({f"{generation}{part}": {"runs": []}}, generation, part)
    cache.prune_packs()
    kept = sorted(p.name for p in (tmp_path / "packs").glob("*.json"))
    assert len(kept) == 2 * cache_module.PACKS_KEPT
    assert kept[0].startswith("0000000000000002") and kept[-1] == "0000000000000003-1.json"
    assert FileCache(tmp_path).get("00000000000000031") == {"runs": []}
    assert FileCache(tmp_path).get("00000000000000010") is None


def test_a_cold_load_of_many_files_writes_one_pack_that_a_warm_load_reads(world, monkeypatch):

    from reconciler.load import FileCache

    monkeypatch.setattr(cache_module, "PACK_FROM", 3)
    for i in range(4):
        world.run(f"r{i}")
    folder = world.root / "packed"
    cold = load_source(["runs"], cache=FileCache(folder))
    packs = list((folder / "packs").glob("*.json"))
    assert len(packs) == 1 and [p for p in folder.rglob("*.json") if p not in packs] == []
    warm_cache = FileCache(folder)
    warm = load_source(["runs"], cache=warm_cache)
    assert warm_cache._packs and {n: r.digest for n, r in warm.runs.items()} == {
        n: r.digest for n, r in cold.runs.items()
    }
    for k in range(3):  # other sets of files: new packs; only the newest PACKS_KEPT stay
        world.run(f"s{k}")
        load_source(["runs"], cache=FileCache(folder))  # one miss: one file, no pack
        world.run(f"t{k}a"), world.run(f"t{k}b"), world.run(f"t{k}c")
        load_source(["runs"], cache=FileCache(folder))
    assert len(list((folder / "packs").glob("*.json"))) == cache_module.PACKS_KEPT
    again = load_source(["runs"], cache=FileCache(folder))
    assert again.ok and len(again.runs) == 4 + 3 + 9


def test_a_run_from_the_cache_reads_its_document_again_from_its_file(world, monkeypatch):
    from reconciler.load import FileCache

    monkeypatch.setenv("ASTRA_TEMPLATE_PATH", str(world.root / "tpl"))
    (world.root / "tpl").mkdir()
    (world.root / "tpl" / "job.yaml").write_text(
        "metadata: {name: job}\nparameters: {image: {type: string, default: 'python:3.12'}}\n"
        "spec:\n  task_template: {image: '{{ image }}', command: python}\n"
    )
    world.run("plain")
    world.write("templated.yaml", "metadata: {name: templated}\ntemplate: {name: job}\n")
    fresh = load_source(["runs"], cache=FileCache(None))
    cache = FileCache(world.root / "c")
    load_source(["runs"], cache=cache)  # cold: the cache learns names and digests
    warm = load_source(["runs"], cache=FileCache(world.root / "c"))
    assert warm.taken == {"cache": 2}
    import reconciler.desired as desired_module

    validated = []
    real = desired_module.validate_data
    monkeypatch.setattr(desired_module, "validate_data", lambda *a, **k: validated.append(a) or real(*a, **k))
    full = documents(warm, {"plain", "templated"})
    assert validated == []  # the same bytes, rendered to the same digests: valid when loaded
    for name in ("plain", "templated"):
        item = warm.runs[name]
        assert item.document is None and item.digest == fresh.runs[name].digest
        assert (
            full[name].document == fresh.runs[name].document
            and full[name].after() == fresh.runs[name].after()
        )


def test_a_cached_file_changed_before_its_document_is_read_stops_the_plan(world):
    from reconciler.load import FileCache
    from reconciler.plan import PlanError

    world.run("a")
    load_source(["runs"], cache=FileCache(world.root / "c"))
    warm = load_source(["runs"], cache=FileCache(world.root / "c"))
    world.run("a", image="python:3.13")
    with pytest.raises(PlanError, match=r"runs/a.yaml changed while it was being planned: plan again"):
        documents(warm, {"a"})


def test_a_template_changed_before_a_document_is_read_again_stops_the_plan(world, monkeypatch):
    from reconciler.load import FileCache
    from reconciler.plan import PlanError

    monkeypatch.setenv("ASTRA_TEMPLATE_PATH", str(world.root / "tpl"))
    (world.root / "tpl").mkdir()
    job = world.root / "tpl" / "job.yaml"
    job.write_text("metadata: {name: job}\nspec:\n  task_template: {image: 'python:3.12', command: python}\n")
    world.write("templated.yaml", "metadata: {name: templated}\ntemplate: {name: job}\n")
    load_source(["runs"], cache=FileCache(world.root / "c"))
    warm = load_source(["runs"], cache=FileCache(world.root / "c"))
    job.write_text("metadata: {name: job}\nspec:\n  task_template: {image: '', command: python}\n")
    with pytest.raises(PlanError, match=r"templated.yaml changed while it was being planned: plan again"):
        documents(warm, {"templated"})  # what it renders now was never validated: not taken


def test_files_touched_since_are_hashed_on_every_core_and_taken_from_the_cache(world, monkeypatch):
    from reconciler.load import FileCache

    for i in range(6):
        world.run(f"r{i}")
    monkeypatch.setattr(source_module, "forkable", lambda n, minimum: n >= 2)
    monkeypatch.setattr(cores, "cores", lambda: 2)
    first = load_source(["runs"], cache=FileCache(world.root / "c"))
    for path in (world.root / "runs").iterdir():
        path.write_bytes(path.read_bytes())  # the same content, another stat: hashed again

    def entries_written() -> dict:
        return {p: p.stat().st_mtime_ns for p in (world.root / "c").rglob("*.json") if p.name != "stat.json"}

    before = entries_written()
    again = load_source(["runs"], cache=FileCache(world.root / "c"))
    assert {n: r.digest for n, r in again.runs.items()} == {n: r.digest for n, r in first.runs.items()}
    assert entries_written() == before  # nothing loaded anew: all from the cache
    assert again.hashes() == first.hashes()


# ---- the path taken: said by the load (``Loaded.taken``) and by the debug log -----------------------


def test_a_warm_plan_takes_the_cache_and_the_digests(world, caplog):
    import logging

    from reconciler import reconcile

    for i in range(3):
        explicit_run(world, f"r{i}")
    world.converge()
    caplog.set_level(logging.DEBUG, logger="reconciler")
    loaded, plan = reconcile.load_and_plan(
        world.source(), world.cluster, world.store, world.now, cache=world.cache
    )
    assert loaded.taken == {"cache": 3} and not plan.has_changes
    assert "plan: 3 of 3 runs unchanged by digest (the fast path)" in caplog.messages
    seen = reconcile.observe_source(world.source(), loaded, world.cluster, world.store)
    assert seen.by_digest and seen.unchanged == {"r0", "r1", "r2"} and seen.needed == set()


def test_a_plan_off_the_fast_path_says_why(world, caplog, monkeypatch):
    import logging

    from reconciler import reconcile

    world.run("a")
    world.converge()
    caplog.set_level(logging.DEBUG, logger="reconciler")
    monkeypatch.setattr(reconcile, "FAST_PATH", False)
    loaded, _ = reconcile.load_and_plan(
        world.source(), world.cluster, world.store, world.now, cache=world.cache
    )
    assert "plan: every run compared in full (the fast path is off)" in caplog.messages
    seen = reconcile.observe_source(
        world.source(), loaded, world.cluster, world.store, scope={"a"}, fast=True
    )
    assert not seen.by_digest and seen.needed == {"a"}
    assert "plan: every run compared in full (a scope of 1 runs: each got alone)" in caplog.messages


def test_a_cold_load_of_many_files_takes_the_forked_shares_and_says_so_when_they_fail(
    world, monkeypatch, caplog
):
    import logging

    from reconciler.load import FileCache

    for i in range(4):
        world.run(f"r{i}")
    _cold_on_two_cores(monkeypatch)
    assert load_source(["runs"], cache=FileCache(world.root / "a")).taken == {"shares": 4}

    def broken(*args, **kwargs):
        raise OSError("no fork here")

    monkeypatch.setattr(parallel_module, "on_every_core", broken)
    caplog.set_level(logging.DEBUG, logger="reconciler")
    fallen = load_source(["runs"], cache=FileCache(world.root / "b"))
    assert fallen.taken == {"here": 4} and fallen.ok and sorted(fallen.runs) == ["r0", "r1", "r2", "r3"]
    assert (
        "parallel load: the shares failed (OSError: no fork here): 4 of 4 files are loaded in this process"
        in caplog.messages
    )
