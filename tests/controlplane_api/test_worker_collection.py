"""``GET /tasks`` and ``GET /workers``: the workspace's workers as a collection (seed 000: "a worker
is a task (/tasks, also /workers)"), filtered by ``?run=`` and ``?state=``, paged by ``?limit=``
and ``?continue=``."""

from __future__ import annotations

import pytest

from .conftest import LONG
from .test_api import tiny


@pytest.fixture
def three_runs(client, plane):
    """a: 3 copies that fail; b: 2 copies that complete; c: one worker that completes."""
    client.post("/api/runs", json=tiny("a", command="exit 3", array={"size": 3}))
    client.post("/api/runs", json=tiny("b", array={"size": 2}))
    client.post("/api/runs", json=tiny("c"))
    for name in ("a", "b", "c"):
        plane.settle_run(name)


def names(body: dict) -> list[str]:
    return [w["name"] for w in body["items"]]


@pytest.mark.parametrize("path", ["/api/tasks", "/api/workers", f"{LONG}/tasks", f"{LONG}/workers"])
def test_tasks_and_workers_list_every_worker_of_the_workspace(client, three_runs, path):
    r = client.get(path)
    assert r.status_code == 200
    body = r.json()
    assert names(body) == ["a-0", "a-1", "a-2", "b-0", "b-1", "c-0"]  # runs as submitted, then rank
    assert body["total"] == 6 and body["task_counts"] == {"Completed": 3, "Failed": 3}
    assert body["continue"] is None
    first = body["items"][0]
    assert (first["run"], first["state"], first["reason"], first["exit_code"]) == (
        "a",
        "Failed",
        "Exited with code 3",
        3,
    )
    assert first == client.get("/api/workers/a-0").json()


def test_filters_by_run_and_by_state_each_repeatable(client, three_runs):
    assert names(client.get("/api/tasks?run=b").json()) == ["b-0", "b-1"]
    assert names(client.get("/api/tasks?run=c&run=b").json()) == ["b-0", "b-1", "c-0"]
    assert names(client.get("/api/workers?state=Completed").json()) == ["b-0", "b-1", "c-0"]
    both = client.get("/api/workers?state=Completed&state=Failed&run=a&run=c").json()
    assert names(both) == ["a-0", "a-1", "a-2", "c-0"] and both["total"] == 4
    assert client.get("/api/workers?state=Pulling").json() == {
        "items": [],
        "total": 0,
        "task_counts": {},
        "continue": None,
    }
    assert client.get("/api/workers?run=nothing").json()["total"] == 0


def test_an_unknown_state_is_a_422_naming_the_states(client):
    r = client.get("/api/tasks?state=Sleeping")
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert detail.startswith("unknown state 'Sleeping'") and "'Pulling'" in detail and "'Stale'" in detail


def test_pages_follow_continue_tokens_to_the_whole_listing(client, three_runs):
    whole = names(client.get("/api/tasks").json())
    seen, token, pages = [], None, 0
    while True:
        query = "/api/tasks?limit=4" + (f"&continue={token}" if token else "")
        body = client.get(query).json()
        assert len(body["items"]) <= 4 and body["total"] == 6
        seen += names(body)
        pages += 1
        token = body["continue"]
        if token is None:
            break
    assert seen == whole and pages == 2
    failed = client.get("/api/tasks?state=Failed&limit=2").json()
    assert names(failed) == ["a-0", "a-1"] and failed["total"] == 3
    rest = client.get(f"/api/tasks?state=Failed&limit=2&continue={failed['continue']}").json()
    assert names(rest) == ["a-2"] and rest["continue"] is None


def test_a_page_continues_after_its_last_worker_while_runs_come_and_go(client, plane, three_runs):
    first = client.get("/api/tasks?limit=2").json()
    assert names(first) == ["a-0", "a-1"]
    client.delete("/api/runs/a")
    client.post("/api/runs", json=tiny("d"))
    plane.step()
    rest = client.get(f"/api/tasks?continue={first['continue']}").json()
    assert names(rest) == ["b-0", "b-1", "c-0", "d-0"]


@pytest.mark.parametrize("query", ["continue=nope", "continue=WzFd", "limit=0", "limit=10001", "limit=x"])
def test_a_bad_limit_or_a_token_that_is_not_one_is_a_422(client, query):
    r = client.get(f"/api/workers?{query}")
    assert r.status_code == 422 and r.json()["detail"]


def test_the_collection_needs_the_token_and_the_workspace(client):
    assert client.get("/api/tasks", token=None).status_code == 401
    assert client.get("/api/v1/orgs/acme/workspaces/default/clusters/default/api/tasks").status_code == 403
