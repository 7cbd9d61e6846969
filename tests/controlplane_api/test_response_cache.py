"""``ResponseCache``: the listings' texts are the models' answers, made again only for what changed.

An engine on SQLite with a simulated executor (each worker exits 0 after 60 s), simulated time."""

from __future__ import annotations

import json

import pytest

from reconciler.controlplane.api import cache as cache_module
from reconciler.controlplane.api.cache import ResponseCache
from reconciler.controlplane.api.views import run_view, workers_text
from reconciler.controlplane.scheduler import CancelRun
from reconciler.runspec.normalize import spec_digest
from reconciler.wire import models as wire

from .test_api import seed, tiny
from .test_summary_state import sim  # noqa: F401  (the fixture)

URL = "http://astra.test/api/v1/orgs/default/workspaces/default/clusters/default/api/runs/"


@pytest.fixture
def digests(monkeypatch) -> list[str]:
    """The runs whose digest the cache computed, in order."""
    made: list[str] = []

    def counted(doc):
        made.append(doc["metadata"]["name"])
        return spec_digest(doc)

    monkeypatch.setattr(cache_module, "spec_digest", counted)
    return made


def submit(sim, *docs) -> None:  # noqa: F811
    for doc in docs:
        sim.engine.submit(doc, sim.clock.now())


def test_the_summary_listing_is_the_models_answer_in_submission_order(sim, digests):  # noqa: F811
    submit(sim, tiny("b"), seed("sweep"), tiny("a"))
    cache = ResponseCache(sim.engine)
    listing = wire.RunSummaryList.model_validate_json(cache.summaries())
    assert [s.name for s in listing.items] == ["b", "sweep", "a"]
    assert listing.items[1].spec_digest == spec_digest(seed("sweep"))
    assert {s.state for s in listing.items} == {wire.RunState.PENDING}
    assert sorted(digests) == ["a", "b", "sweep"]


def test_one_generation_one_text_and_a_new_one_encodes_only_what_changed(sim, digests):  # noqa: F811
    submit(sim, tiny("a"), tiny("b"))
    cache = ResponseCache(sim.engine)
    first = cache.summaries()
    assert cache.summaries() is first  # no run changed: the same text, nothing made again
    sim.engine.generation += 1  # a generation with no run changed: each part kept
    assert cache.summaries() == first and len(digests) == 2

    sim.engine.observe(CancelRun("b"), sim.clock.now())
    sim.step()  # states moved (b cancelled, a started), nothing of a document: no new digest
    after = {s["name"]: s for s in json.loads(cache.summaries())["items"]}
    assert (after["a"]["state"], after["b"]["state"]) == ("Running", "Cancelled")
    assert len(digests) == 2

    doc = tiny("a", priority=3)  # a's document: a new resource_version, a new digest
    sim.engine.update("a", doc, None, sim.clock.now())
    after = {s["name"]: s for s in json.loads(cache.summaries())["items"]}
    assert after["a"]["spec_digest"] == spec_digest(doc) and digests == ["a", "b", "a"]


def test_a_deleted_run_is_forgotten_and_its_name_again_is_a_new_run(sim, digests):  # noqa: F811
    submit(sim, tiny("a"), tiny("b"))
    cache = ResponseCache(sim.engine)
    cache.summaries()
    assert len(cache) == 2
    sim.engine.delete("a", sim.clock.now())
    assert [s["name"] for s in json.loads(cache.summaries())["items"]] == ["b"]
    assert len(cache) == 1
    submit(sim, tiny("a", command="false"))
    (_, again) = json.loads(cache.summaries())["items"]
    assert again["spec_digest"] == spec_digest(tiny("a", command="false"))


def test_a_runs_text_is_its_view_at_every_step(sim):  # noqa: F811
    """``run_text`` (the listing's, from kept texts) and ``run_view`` (the model's) are twins."""
    submit(sim, seed("llama-ft"), tiny("s", array={"size": 3, "max_parallel": 1}), tiny("x"))
    cache = ResponseCache(sim.engine)

    def agree() -> None:
        listing = json.loads(cache.runs(URL, "default"))
        names = list(sim.engine.state.runs)
        views = [
            run_view(sim.engine, n, URL, "default").model_dump(mode="json", exclude_unset=True) for n in names
        ]
        assert listing == {"items": views}
        wire.RunList.model_validate(listing)

    agree()
    sim.step()  # placed and started
    agree()
    sim.engine.update("x", tiny("x", priority=9), None, sim.clock.now())  # a new document
    sim.clock.advance(60.0)
    sim.step()  # the workers end
    agree()
    sim.engine.delete("s", sim.clock.now())
    agree()


def test_the_brief_and_workers_listings_are_the_fresh_ones_at_every_step_and_kept_between(sim):  # noqa: F811
    """The brief listing (``astra get runs``) and a run's workers (``astra get workers``) are,
    at every step, what a cache that never made them answers; asked again with nothing changed,
    the same text is sent again."""
    submit(sim, seed("llama-ft"), tiny("s", array={"size": 3, "max_parallel": 1}), tiny("x"))
    cache = ResponseCache(sim.engine)

    def agree() -> None:
        fresh = ResponseCache(sim.engine)
        briefs = cache.briefs()
        assert json.loads(briefs) == json.loads(fresh.briefs())
        assert cache.briefs() is briefs  # nothing changed: the same text again
        names = list(sim.engine.state.runs)
        kept = ["s"] if "s" in names else []  # the last asked before, first now: kept if unchanged
        for name in [*kept, *(n for n in names if n != "s"), *kept]:
            workers = cache.workers(name)
            assert json.loads(workers) == json.loads(workers_text(sim.engine, name))
            assert cache.workers(name) is workers

    agree()
    sim.step()  # placed and started
    agree()
    sim.engine.observe(CancelRun("x"), sim.clock.now())
    sim.step()
    agree()
    sim.clock.advance(60.0)
    sim.step()  # the workers end; the array's next copy starts
    agree()
    sim.engine.delete("s", sim.clock.now())
    agree()


def test_a_brief_listing_with_a_run_on_a_schedule_is_made_at_each_ask(sim):  # noqa: F811
    """A schedule's next time and its suspension move without a tick: a listing that shows a
    run on a schedule is made again each time it is asked."""
    submit(sim, tiny("nightly", schedule={"cron": "0 2 * * *"}), tiny("x"))
    sim.step()
    cache = ResponseCache(sim.engine)

    def nightly() -> dict:
        return next(b for b in json.loads(cache.briefs())["items"] if b["name"] == "nightly")

    assert nightly() == next(
        b for b in json.loads(ResponseCache(sim.engine).briefs())["items"] if b["name"] == "nightly"
    )
    before = nightly()
    sim.engine.schedules.suspend("nightly", "ana", sim.clock.now())
    after = nightly()
    assert after != before
    assert after == next(
        b for b in json.loads(ResponseCache(sim.engine).briefs())["items"] if b["name"] == "nightly"
    )
