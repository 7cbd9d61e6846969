"""``/openapi.json`` says what the API does: every operation named once, every path parameter and
body declared, and every answer a client gets (status and body) listed under its operation."""

from __future__ import annotations

import copy
import re
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from .conftest import LONG, Client
from .test_api import seed, tiny

METHODS = ("get", "put", "post", "delete", "patch")


@pytest.fixture
def doc(client) -> dict[str, Any]:
    r = client.get("/openapi.json")
    assert r.status_code == 200
    return r.json()


def operations(doc: dict[str, Any]):
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method in METHODS:
                yield path, method, op


def test_every_operation_has_a_unique_operation_id(doc):
    ids = [op.get("operationId") for _, _, op in operations(doc)]
    assert all(ids) and len(ids) == len(set(ids))
    assert {"create_run", "create_job", "list_run_workers", "get_task_logs", "put_source_run"} <= set(ids)


def test_every_path_parameter_is_declared_and_both_base_paths_are_servers(doc):
    for path, method, op in operations(doc):
        named = set(re.findall(r"\{(\w+)\}", path))
        declared = {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}
        assert named == declared, (method, path)
        assert all(p["required"] for p in op.get("parameters", []) if p["in"] == "path")
    servers = {s["url"]: s for s in doc["servers"]}
    assert set(servers) == {"/api", LONG.replace("default", "{%s}") % ("org", "workspace", "cluster")}
    long = next(s for s in doc["servers"] if s["url"] != "/api")
    assert set(long["variables"]) == set(re.findall(r"\{(\w+)\}", long["url"]))


def test_every_write_declares_its_body_and_the_run_document_is_the_published_schema(doc):
    for path, method, op in operations(doc):
        if method in ("put", "post"):
            assert "requestBody" in op, (method, path)
    body = doc["paths"]["/runs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/RunDocument"}
    run = doc["components"]["schemas"]["RunDocument"]
    # less its template: the cluster takes final run specs (a template is a 422)
    assert set(run["properties"]) == {"metadata", "spec"} and run["required"] == ["metadata", "spec"]
    refs = re.findall(r'"\$ref": "([^"]+)"', str(doc).replace("'", '"'))
    assert all(r.removeprefix("#/components/schemas/") in doc["components"]["schemas"] for r in refs)


def test_every_operation_needs_the_token_and_lists_401_and_403(doc):
    assert doc["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    for path, method, op in operations(doc):
        if op["operationId"] == "call_source_hook":  # a webhook: signed by the source's secret instead
            assert "security" not in op and "401" in op["responses"]
            continue
        assert op["security"] == [{"HTTPBearer": []}], (method, path)
        assert {"401", "403"} <= set(op["responses"]), (method, path)
        assert "HTTPValidationError" not in str(op["responses"])


def test_the_worker_collection_documents_its_filters_and_its_pages(doc):
    for path, word in (("/workers", "worker"), ("/tasks", "task")):
        op = doc["paths"][path]["get"]
        assert op["operationId"] == f"list_{word}s"
        params = {p["name"]: p for p in op["parameters"]}
        assert set(params) == {"run", "state", "limit", "continue"}
        assert all(p["in"] == "query" and not p["required"] for p in params.values())
        # a query parameter is absent or text, never null: its schema has no null branch
        run = params["run"]["schema"]
        assert (run["type"], run["items"]) == ("array", {"type": "string"})
        states = params["state"]["schema"]
        assert states["type"] == "array" and states["items"] == {"$ref": "#/components/schemas/WorkerState"}
        limit = params["limit"]["schema"]
        assert (limit["type"], limit["minimum"], limit["maximum"]) == ("integer", 1, 10000)
        assert set(op["responses"]) >= {"200", "401", "403", "422"}
    assert "Pulling" in doc["components"]["schemas"]["WorkerState"]["enum"]
    page = doc["components"]["schemas"]["WorkerPage"]
    assert set(page["required"]) == {"items", "total", "task_counts", "continue"}


# ---- what the API answers is what the document lists -----------------------------------------


class Recording(Client):
    """The test client, keeping every request and its answer."""

    def __init__(self, plane) -> None:
        super().__init__(plane)
        self.seen: list[tuple[str, str, httpx.Response]] = []

    def request(self, method: str, path: str, **kw) -> httpx.Response:
        r = super().request(method, path, **kw)
        self.seen.append((method, path, r))
        return r


def the_operation(doc: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    """The operation a request of ``path`` (under either base path) is served by."""
    path = path.split("?", 1)[0]
    rest = path.removeprefix(LONG) if path.startswith(LONG) else path.removeprefix("/api")
    rest = re.sub(r"^/v1/orgs/[^/]+/workspaces/[^/]+/clusters/[^/]+/api", "", rest)
    for template, item in doc["paths"].items():
        pattern = "^" + re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(template)) + "$"
        if re.match(pattern, rest) and method.lower() in item:
            return item[method.lower()]
    raise AssertionError(f"no operation for {method} {path}")


def closed(node: Any) -> Any:
    """A schema whose objects refuse keys they do not name (unless they say they take more)."""
    if isinstance(node, dict):
        out = {k: closed(v) for k, v in node.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [closed(v) for v in node]
    return node


def check_answer(doc: dict[str, Any], method: str, path: str, r: httpx.Response) -> None:
    op = the_operation(doc, method, path)
    listed = op["responses"].get(str(r.status_code))
    assert listed is not None, (
        f"{method} {path} answered {r.status_code}, not listed in {sorted(op['responses'])}"
    )
    if not r.content:
        return
    media = r.headers["content-type"].split(";")[0]
    assert media in (listed.get("content") or {}), f"{method} {path} {r.status_code}: {media} not listed"
    content = listed["content"][media]
    if media != "application/json":
        return
    schema = {**closed(content["schema"]), "components": closed(copy.deepcopy(doc["components"]))}
    errors = sorted(Draft202012Validator(schema).iter_errors(r.json()), key=str)
    assert not errors, f"{method} {path} {r.status_code}: {errors[0].message} at {list(errors[0].path)}"


def runs_scenario(c: Client, plane) -> None:
    c.post("/api/runs", json=seed("sweep"))
    c.post(f"{LONG}/jobs", json=tiny("a", command="echo hi", array={"size": 2}))
    c.post("/api/runs", json=tiny("a"))  # 409
    bad = seed("sweep")
    bad["spec"]["array"]["size"] = 0
    c.post("/api/runs", json=bad)  # 422
    c.post("/api/runs", content=b"{nope", headers={"content-type": "application/json"})  # 422
    plane.settle_run("a")
    plane.step()
    for path in ("/api/runs", "/api/runs?view=summary", "/api/runs?view=full", "/api/runs?view=x"):
        c.get(path)
    c.get("/api/runs/sweep")
    c.get("/api/jobs/nothing")  # 404
    sweep = c.get("/api/runs/sweep").json()
    wider = {"metadata": sweep["metadata"], "spec": {**sweep["spec"], "priority": 3}}
    c.put("/api/runs/sweep", json=wider)
    c.put("/api/runs/sweep", json=wider)  # 409: stale
    c.put("/api/runs/sweep", json=tiny("other"))  # 422
    c.put("/api/runs/nothing", json=tiny("nothing"))  # 404
    c.get("/api/runs/a/events")
    c.get("/api/runs/a/workers")
    c.get(f"{LONG}/jobs/a/tasks")
    c.get("/api/workers/a-0")
    c.get("/api/tasks/nothing")  # 404
    c.get("/api/workers/a-0/logs")
    c.get("/api/workers/a-0/logs?attempt=1")
    c.get("/api/workers/a-0/logs?attempt=9")  # 404
    c.get("/api/workers/a-0/logs?attempt=-1")  # 422
    c.get("/api/workers")
    c.get(f"{LONG}/tasks?run=a&state=Completed&state=Failed&limit=1")
    c.get("/api/tasks?state=Nope")  # 422
    c.get("/api/workers?continue=nope")  # 422
    c.get("/api/machines")
    c.get("/api/info")
    c.delete("/api/runs/a")
    c.get("/api/runs", token=None)  # 401
    c.get("/api/v1/orgs/acme/workspaces/default/clusters/default/api/runs")  # 403


def sources_scenario(c: Client) -> None:
    entry = {"spec": tiny("a"), "applied_at": 1.0, "file": "a.yaml"}
    c.get("/api/sources/s")  # 404
    c.post("/api/sources/s/lock", json={"owner": "me", "id": "L"})
    c.post("/api/sources/s/lock", json={"owner": "you"})  # 409
    c.post("/api/sources/s/lock", json={"owner": 3})  # 422
    c.put("/api/sources/s/runs/a", json=entry, headers={"X-Astra-Lock": "L"})
    c.put("/api/sources/s/runs/b", json=entry)  # 409: no lock named
    c.put("/api/sources/s/runs/b", json={"spec": []}, headers={"X-Astra-Lock": "L"})  # 422
    c.delete("/api/sources/s/runs/zzz", headers={"X-Astra-Lock": "L"})  # 404
    c.put("/api/sources/s/status", json={"state": "Ready", "reason": "ReconciliationSucceeded"})
    c.post(
        "/api/sources/s/history", json={"who": "me", "when": 2.0, "result": "applied"}, params={"lock": "L"}
    )
    tag = c.get("/api/sources/s").headers["etag"]
    c.get("/api/sources/s", headers={"If-None-Match": tag})  # 304
    c.get("/api/sources/s/runs")
    c.get("/api/sources/s/runs?view=digest&run=a&run=x")
    c.get("/api/sources/s/runs?view=summary")  # 422
    c.get("/api/sources")
    c.put("/api/sources/t", json={"resource_version": 0, "inventory": {"a": entry}, "note": "kept"})
    c.put("/api/sources/t", json={"resource_version": 0})  # 409: stale
    c.put("/api/sources/t", json={"inventory": ["a"]})  # 422
    c.delete("/api/sources/s/lock?id=other")  # 409
    c.delete("/api/sources/s/lock?id=L")  # 204
    c.delete("/api/sources/s/lock")  # 404
    c.put("/api/sources/s/status", json={}, token=None)  # 401


def test_every_answer_is_listed_under_its_operation_with_its_shape(plane, doc):
    c = Recording(plane)
    runs_scenario(c, plane)
    sources_scenario(c)
    statuses = {r.status_code for _, _, r in c.seen}
    assert {200, 201, 204, 304, 401, 403, 404, 409, 422} <= statuses  # the scenario reaches them all
    for method, path, r in c.seen:
        check_answer(doc, method, path, r)


def test_the_conformance_check_refuses_an_unlisted_status_and_an_undeclared_key(plane, doc):
    """The check above can fail: a status the operation does not list, a key no model names."""
    with pytest.raises(AssertionError, match="not listed"):
        check_answer(doc, "GET", "/api/info", httpx.Response(409, json={"detail": "x"}))
    info = {"org": "o", "workspace": "w", "cluster": "c", "executor": "process", "schema_version": 4}
    check_answer(doc, "GET", "/api/info", httpx.Response(200, json=info))
    with pytest.raises(AssertionError, match="Additional properties"):
        check_answer(doc, "GET", "/api/info", httpx.Response(200, json={**info, "colour": "blue"}))
