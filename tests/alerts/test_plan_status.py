"""``astra plan --status-context CTX`` in CI: the plan's verdict posted on its commit, through the
server's ``POST /alerts:status`` and the workspace's github alert, to a local stand-in of GitHub's
statuses API (it checks the documented request: ``POST /repos/{owner}/{repo}/statuses/{sha}``, a
Bearer token, ``state``, ``context``, ``description``; it answers 201 as GitHub does). The files
are in a local git repository; the CLI's API calls go to the control plane over ASGI."""

from __future__ import annotations

import io
import random

import pytest

from reconciler.cli.app import run
from reconciler.cli.remote import CommandError
from reconciler.controlplane.alerts import Delivery
from tests.sources.conftest import ENV, Repo

GOOD = 'metadata: {name: a}\nspec:\n  task_template: {image: x, command: "true"}\n'
BAD = 'metadata: {name: a}\nspec:\n  array: {size: 0}\n  task_template: {image: x, command: "true"}\n'


@pytest.fixture
def ci(client, wire, receiver, tmp_path, monkeypatch, capsys):
    """``cli(*argv)`` in the repository's work tree, and the statuses GitHub's stand-in took."""
    cluster, _ = wire
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("ASTRA_HOME", str(tmp_path / ".astra"))
    (tmp_path / "git").mkdir()
    repo = Repo(tmp_path / "git")
    monkeypatch.chdir(repo.work)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    monkeypatch.setattr("reconciler.cli.connect.connect", lambda server, token, **_: cluster)

    def call(method, path, *, server, token, json=None, start=True):
        got = client.request(method, "/api" + path, json=json)
        if got.status_code >= 400:
            raise CommandError(f"{got.status_code}: {got.text}")
        return got

    monkeypatch.setattr("reconciler.cli.remote.call", call)
    statuses = []

    def answer(r):
        ok = r.headers.get("authorization") == "Bearer ghp_example" and r.path.startswith(
            "/repos/acme/runs/statuses/"
        )
        statuses.append((r.path.rsplit("/", 1)[1], r.json()))
        return (201, {}, b"{}") if ok else (401, {}, b"{}")

    receiver.answer = answer
    delivery = Delivery(
        client.plane.store,
        lambda ws, n: {"gh-token": b"ghp_example"}.get(n),
        clock=lambda: 1e6,
        rng=random.Random(1),
    )

    def cli(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = run(list(argv))
        out, err = capsys.readouterr()
        delivery.step()
        return code, out, err

    github = {"kind": "github", "repo": "acme/runs", "token": "gh-token", "api": receiver.url}
    return cli, repo, statuses, github


def test_a_plan_in_ci_posts_success_with_its_summary_and_a_failing_one_failure_with_its_first_error(
    client, ci
):
    cli, repo, statuses, github = ci
    assert client.put("/api/alerts/commits", json={"sink": github}).status_code == 201
    repo.write("runs/a.yaml", GOOD)
    good = repo.commit("a run")
    code, out, err = cli(
        "plan", "-f", "runs", "--source", "ci", "--status-context", "astra/plan", "-o", "markdown"
    )
    assert code == 0, err
    assert "a" in out
    (posted,) = statuses
    assert posted == (
        good,
        {
            "state": "success",
            "description": "plan: 1 to create, 0 to update, 0 to replace, 0 to delete",
            "context": "astra/plan",
            "target_url": "http://astra.test/o/default/w/default/sources/ci",  # the source's page
        },
    )

    repo.write("runs/a.yaml", BAD)
    bad = repo.commit("a broken run")
    code, _, err = cli("plan", "-f", "runs", "--source", "ci", "--status-context", "astra/plan")
    assert code == 1
    sha, failure = statuses[1]
    assert sha == bad and failure["state"] == "failure" and failure["context"] == "astra/plan"
    assert failure["description"].startswith("plan failed: ") and "spec.array.size" in failure["description"]
    assert len(failure["description"]) <= 140
    assert "ghp_example" not in err


def test_a_plan_with_no_commit_status_alert_says_so_and_keeps_its_exit_code(client, ci):
    cli, repo, statuses, _ = ci
    hook = {"kind": "webhook", "url": "hook-url", "key": "hook-key"}
    assert client.put("/api/alerts/hook", json={"sink": hook}).status_code == 201  # not a status sink
    repo.write("runs/a.yaml", GOOD)
    repo.commit("a run")
    code, _, err = cli("plan", "-f", "runs", "--source", "ci", "--status-context", "astra/plan")
    assert code == 0 and statuses == []
    assert "no github or gitlab alert selects source ci: no status posted" in err
    assert client.get("/api/alerts:history").json()["items"] == []
