"""``POST /runs:placement``: where runs would start if submitted now, from the real scheduler,
changing nothing."""

from __future__ import annotations

from reconciler.wire import BATCH_MAX

from .test_api import tiny

PLACE = "/api/runs:placement"


def gpus(name: str, count: int, *, machines: int | None = None, command: str = "true", **spec) -> dict:
    doc = tiny(name, command=command, **spec)
    res = doc["spec"]["task_template"]["requested_resources"] = {"gpu_requests": {"count": count}}
    if machines:
        res["machines"] = machines
    return doc


def outlooks(client, docs: list[dict]) -> list[tuple[str, str] | None]:
    r = client.post(PLACE, json={"runs": docs})
    assert r.status_code == 200, r.text
    return [
        None if i["outlook"] is None else (i["outlook"]["kind"], i["outlook"]["words"])
        for i in r.json()["items"]
    ]


def test_a_fitting_gang_gets_its_shape_in_words(client):
    gang = gpus("gang", 16, machines=2)  # a run over machines is a gang
    assert outlooks(client, [gang]) == [("start", "2 machines x 8 GPUs, one NVLink domain")]


def test_a_run_waiting_for_room_says_so_with_the_gpus_free(client, plane):
    big = gpus("big", 120, machines=15, command="sleep 60")
    assert client.post("/api/runs", json=big).status_code == 201
    plane.step()
    assert plane.run("big").state in ("Starting", "Running"), plane.run("big").reason
    [(kind, words)] = outlooks(client, [gpus("more", 16, machines=2)])
    assert kind == "wait"
    assert words.startswith("Waiting for room")
    assert words.endswith("(8 GPUs are free now)")


def test_an_array_starts_as_many_copies_as_max_parallel_and_says_why_the_rest_wait(client):
    sweep = gpus("sweep", 1, array={"size": 20, "max_parallel": 4})
    assert outlooks(client, [sweep]) == [
        (
            "start",
            "4 of 20 workers at once, on 1 machine x 4 GPUs; "
            "the others wait: Array runs at most 4 workers at once",
        )
    ]


def test_a_run_that_could_never_fit_says_why_and_a_bad_document_gets_post_runs_words(client):
    bad = tiny("bad")
    bad["spec"]["task_template"]["restart_policy"] = "Sometimes"
    r = client.post(PLACE, json={"runs": [gpus("huge", 8000), bad]})
    huge, refused = r.json()["items"]
    assert huge["outlook"]["kind"] == "fail"
    assert "8000" in huge["outlook"]["words"]
    assert (refused["status"], refused["errors"]) == (422, client.post("/api/runs", json=bad).json())


def test_nothing_changes_in_the_engine_or_the_store(client, plane):
    client.post("/api/runs", json=gpus("held", 8, command="sleep 60"))
    plane.step()
    engine = plane.engine
    before = (
        engine.generation,
        dict(engine.state.free),
        {n: (r.state, r.reason) for n, r in engine.state.runs.items()},
        {n: (w.state, w.machine) for n, w in engine.state.workers.items()},
        client.get("/api/runs").json(),
    )
    # "held" is replaced in the copy: its 8 GPUs are free to the dry run
    got = outlooks(client, [gpus("held", 16, machines=2), gpus("new", 8), gpus("new2", 1, array={"size": 3})])
    assert [kind for kind, _ in got] == ["start", "start", "start"]
    plane.step()
    after = (
        engine.generation,
        dict(engine.state.free),
        {n: (r.state, r.reason) for n, r in engine.state.runs.items()},
        {n: (w.state, w.machine) for n, w in engine.state.workers.items()},
        client.get("/api/runs").json(),
    )
    assert after == before
    assert client.get("/api/runs/new").status_code == 404


def test_more_documents_than_a_batch_holds_are_refused_whole(client):
    r = client.post(PLACE, json={"runs": [tiny(f"r{i}") for i in range(BATCH_MAX + 1)]})
    assert r.status_code == 422
    assert r.json()[0]["path"] == "runs"
