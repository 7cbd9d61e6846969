"""``POST /runs/{name}/rerun`` (``Engine.rerun``): a finished run again, whole or its failed copies."""

from __future__ import annotations

from .test_api import tiny

#: Each copy prints what it sees, and the odd original indices fail.
SEES = (
    "echo $ASTRAEUS_ARRAY_TASK_ID $RANK $ASTRAEUS_REPLICA_INDEX $ASTRAEUS_ARRAY_SIZE $WORLD_SIZE;"
    " exit $((RANK % 2))"
)


def test_rerun_failed_makes_an_array_of_the_failed_copies_each_seeing_its_original_index(client, plane):
    client.post("/api/runs", json=tiny("sw", command=SEES, array={"size": 6, "max_parallel": 4}))
    plane.settle_run("sw")
    answer = client.post("/api/runs/sw/rerun", json={"failed": True})
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert body["metadata"]["name"] == "sw-rerun-1"
    assert body["spec"]["array"] == {"size": 3, "max_parallel": 3}
    notes = body["metadata"]["annotations"]
    assert (notes["astra.rerun-of"], notes["astra.rerun-indices"], notes["astra.rerun-size"]) == (
        "sw",
        "1,3,5",
        "6",
    )
    plane.settle_run("sw-rerun-1")
    seen = [client.get(f"/api/workers/sw-rerun-1-{i}/logs").text for i in range(3)]
    assert seen == ["1 1 1 6 6\n", "3 3 3 6 6\n", "5 5 5 6 6\n"]
    # the workers' RANK, as their environment has it (issue 32: not 0 1 2)
    listed = client.get("/api/runs/sw-rerun-1/workers").json()["items"]
    assert [(w["name"], w["rank"]) for w in listed] == [
        ("sw-rerun-1-0", 1),
        ("sw-rerun-1-1", 3),
        ("sw-rerun-1-2", 5),
    ]
    assert client.get("/api/workers/sw-rerun-1-2").json()["rank"] == 5
    # they fail again (odd indices): a rerun of the rerun maps onto the first array's indices
    again = client.post("/api/jobs/sw-rerun-1/rerun", json={"failed": True}).json()
    assert again["metadata"]["name"] == "sw-rerun-1-rerun-1"
    assert again["metadata"]["annotations"]["astra.rerun-indices"] == "1,3,5"
    assert client.post("/api/runs/sw/rerun", json={"failed": True}).json()["metadata"]["name"] == "sw-rerun-2"


def test_rerun_whole_runs_the_same_run_again(client, plane):
    client.post("/api/runs", json=tiny("once", command="echo ran"))
    plane.settle_run("once")
    answer = client.post("/api/runs/once/rerun")
    assert answer.status_code == 201 and answer.json()["metadata"]["name"] == "once"
    assert answer.json()["status"]["state"] == "Pending"
    assert plane.settle_run("once") and plane.run("once").state == "Completed"


def test_rerun_is_refused_in_one_line_where_it_cannot_be(client, plane):
    client.post("/api/runs", json=tiny("busy", command="sleep 30"))
    refused = client.post("/api/runs/busy/rerun", json={"failed": False})
    assert refused.status_code == 409
    assert refused.json()["detail"].startswith("run busy is Pending: only a finished run runs again")
    client.delete("/api/runs/busy")
    client.post("/api/runs", json=tiny("one", command="exit 1"))
    plane.settle_run("one")
    assert client.post("/api/runs/one/rerun", json={"failed": True}).json()["detail"] == (
        "run one is no array: --failed reruns an array's failed copies; rerun it whole"
    )
    client.post("/api/runs", json=tiny("good", command="true", array={"size": 2, "max_parallel": 0}))
    plane.settle_run("good")
    assert client.post("/api/runs/good/rerun", json={"failed": True}).json()["detail"] == (
        "every copy of run good completed: there is nothing to rerun"
    )
    assert client.post("/api/runs/ghost/rerun").status_code == 404
    assert client.post("/api/runs/good/rerun", json={"failed": "yes"}).status_code == 422


def test_a_rerun_stays_in_its_workspace(client, plane):
    team = "/api/v1/orgs/default/workspaces/team-a/clusters/default/api"
    assert client.put("/api/workspaces/team-a/quota", json={"gpus": 8, "runs": 5}).status_code == 200
    made = client.post(f"{team}/runs", json=tiny("sw", command=SEES, array={"size": 2, "max_parallel": 0}))
    assert made.status_code == 201, made.text
    plane.settle_run("default/team-a/default/sw")
    answer = client.post(f"{team}/runs/sw/rerun", json={"failed": True})
    assert answer.status_code == 201, answer.text
    assert answer.json()["metadata"]["name"] == "sw-rerun-1"
    assert client.get(f"{team}/runs/sw-rerun-1").status_code == 200
    assert client.get("/api/runs/sw-rerun-1").status_code == 404  # not in the default workspace
