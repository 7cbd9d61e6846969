"""The reads typed all day ask the server only for what they show (``?view=brief``, the runs
related to one, one page of workers per state, the events' and the log's tails, whose worker
it is), and print exactly what they printed when they read everything: each command line is
run against a real control plane (in-process) twice, through ``HttpCluster`` and through the
same cluster seen only through the ``Cluster`` protocol (which lists every run, every worker,
every event and whole logs), and the two outputs are compared."""

from __future__ import annotations

import io
import json

import httpx
import pytest

from reconciler.cli.app import run
from reconciler.clusters.http import HttpCluster
from reconciler.controlplane.api.views import run_brief, worker_view
from reconciler.controlplane.scopes import DEFAULT_SCOPE
from reconciler.wire import briefs
from reconciler.wire import models as wire

from .conftest import TOKEN, Client, Plane, until
from .test_api import tiny
from .test_rerun import SEES


class Protocol:
    """``cluster`` through the ``Cluster`` protocol's reads only (and ``events``, which the
    control plane keeps): what a cluster without the narrow reads offers."""

    def __init__(self, cluster: HttpCluster) -> None:
        self._cluster = cluster
        self.address = cluster.address

    def list_runs(self):
        return self._cluster.list_runs()

    def list_run_summaries(self):
        return self._cluster.list_run_summaries()

    def get_run(self, name):
        return self._cluster.get_run(name)

    def workers(self, name):
        return self._cluster.workers(name)

    def logs(self, worker):
        return self._cluster.logs(worker)

    def events(self, name):
        return self._cluster.events(name)


@pytest.fixture
def both(tmp_path, monkeypatch, capsys):
    """``astra ARGS`` against the plane through each cluster, and the plane and its client."""
    plane = Plane(tmp_path / "plane")
    client = Client(plane)
    asked: list[str] = []

    def forward(req: httpx.Request) -> httpx.Response:
        asked.append(req.url.raw_path.decode())
        got = client.request(req.method, req.url.raw_path.decode(), headers=dict(req.headers),
                             content=req.content, token=None)  # fmt: skip
        return httpx.Response(got.status_code, headers=got.headers, content=got.content)

    narrow = HttpCluster("http://astra.test", TOKEN, transport=httpx.MockTransport(forward))
    chosen = {"cluster": narrow}
    monkeypatch.setattr("reconciler.cli.connect.connect", lambda server, token, **_: chosen["cluster"])
    monkeypatch.setattr("reconciler.cli.day2.clock", lambda: 1_000_500.0)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    monkeypatch.setenv("NO_COLOR", "1")
    # fewer shown than there are: the lines that say how many more are read too
    monkeypatch.setattr("reconciler.cli.describe.EVENTS_SHOWN", 5)
    monkeypatch.setattr("reconciler.cli.describe.LOGS_OF", 1)
    monkeypatch.setattr("reconciler.cli.describe.NAMED", 1)

    def call(*argv: str) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
        said = []
        for cluster in (narrow, Protocol(narrow)):
            chosen["cluster"] = cluster
            capsys.readouterr()
            asked.clear()
            code = run(list(argv))
            out, err = capsys.readouterr()
            said.append((code, out, err))
            if cluster is narrow:
                call.narrowly = list(asked)  # type: ignore[attr-defined]
        return said[0], said[1]

    call.plane, call.client = plane, client  # type: ignore[attr-defined]
    yield call
    plane.close()


def _seed(both) -> None:
    plane, client = both.plane, both.client
    labelled = tiny("sw", command="seq 1 30; " + SEES, array={"size": 4, "max_parallel": 2})
    labelled["metadata"]["labels"] = {"team": "nlp"}
    labelled["metadata"]["annotations"] = {"astra.source": "repo", "astra.file": "sw.yaml"}
    assert client.post("/api/runs", json=labelled).status_code == 201
    after = tiny("after", depends_on=[{"run": "sw", "when": "Failed"}])
    assert client.post("/api/runs", json=after).status_code == 201
    assert client.post("/api/runs", json=tiny("other", command="exit 3")).status_code == 201
    until(lambda: plane.run("sw").state == "Failed", step=plane.step, what="sw to fail")
    assert client.post("/api/runs/sw/rerun", json={"failed": True}).status_code in (200, 201)
    until(lambda: plane.run("other").state == "Failed", step=plane.step, what="other to fail")


@pytest.mark.parametrize(
    "argv",
    [
        ("get", "runs"),
        ("get", "runs", "-o", "wide"),
        ("get", "runs", "-o", "json"),
        ("get", "runs", "-o", "yaml"),
        ("get", "runs", "-l", "team=nlp"),
        ("get", "runs", "--state", "failed"),
        ("get", "runs", "sw", "after"),
        ("get", "workers", "sw"),
        ("get", "workers", "sw", "-o", "json"),
        ("describe", "run", "sw"),
        ("describe", "run", "after"),
        ("describe", "run", "other"),
        ("logs", "sw-1"),
        ("logs", "sw-1", "--tail", "3"),
        ("logs", "sw-1", "--tail", "0"),
        ("logs", "sw", "--all", "--tail", "2"),
        ("logs", "sw-9"),
    ],
)
def test_a_read_asked_narrowly_prints_what_it_printed_reading_everything(both, argv):
    _seed(both)
    narrow, everything = both(*argv)
    assert narrow == everything


def test_the_reads_ask_for_what_they_show_and_no_listing_of_whole_runs_or_every_worker(both):
    _seed(both)
    assert both("get", "runs")[0][0] == 0
    assert both.narrowly == ["/api/runs?view=brief"]
    assert both("describe", "run", "sw")[0][0] == 0
    asked = both.narrowly
    assert {"/api/runs/sw/events?tail=5", "/api/runs?depends_on=sw", "/api/runs?rerun_of=sw"} <= set(asked)
    assert "/api/runs" not in asked and "/api/runs/sw/workers" not in asked, asked
    assert both("logs", "sw-1", "--tail", "3")[0][0] == 0
    asked = both.narrowly
    assert {"/api/workers/sw-1", "/api/workers/sw-1/logs?tail=3"} <= set(asked)
    assert not any(p.startswith("/api/runs?") or p.endswith("/workers") for p in asked), asked


def test_a_brief_says_what_the_whole_run_says_and_the_workers_are_the_models(both):
    _seed(both)
    client, engine = both.client, both.plane.engine
    whole = {r["metadata"]["name"]: r for r in client.get("/api/runs").json()["items"]}
    text = client.get("/api/runs?view=brief").text
    briefs.RunBriefList.model_validate_json(text)  # the published shape
    for b in json.loads(text)["items"]:
        r = whole[b["name"]]
        shown = ("state", "reason", "created_at", "workers_running", "gpus_held", "schedule")
        assert b == {
            "name": r["metadata"]["name"],
            "labels": r["metadata"].get("labels", {}),
            "annotations": r["metadata"].get("annotations", {}),
            **{k: r["status"][k] for k in shown},
            "task_counts": r["task_counts"],
        }
    for name in ("sw", "sw-rerun-1"):
        ws = sorted(engine.state.workers_of(name), key=lambda w: w.rank)
        model = wire.WorkerList(
            items=[worker_view(engine, w) for w in ws],
            readout=f"Workers {sum(w.state == 'Running' for w in ws)} running of {len(ws)}",
            task_counts=engine.state.task_counts(name),
        )
        assert client.get(f"/api/runs/{name}/workers").json() == json.loads(model.model_dump_json())


def test_the_brief_listing_kept_across_changes_is_the_briefs_made_afresh(both):
    """Each run's brief text is kept while what it shows holds (``views.brief_moving``): listed
    at every step while the runs start, fail and are rerun, it is each run's brief made anew."""
    plane, client = both.plane, both.client
    engine = plane.engine
    fresh = []
    original = plane.step

    def step():
        original()
        listed = client.get("/api/runs?view=brief").json()["items"]
        made = [run_brief(engine, name) for name in engine.runs_of(DEFAULT_SCOPE)]
        assert listed == json.loads(json.dumps(made))
        fresh.append(len(listed))

    plane.step = step
    _seed(both)
    assert len(fresh) > 3 and fresh[-1] == 4  # sw, after, other and the rerun
