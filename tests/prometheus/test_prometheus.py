"""A real Prometheus scrapes a real ``astra server`` with the shipped config; what PromQL answers
is what the API answers. ``promtool`` checks and tests the shipped alert rules, and every
expression of the shipped Grafana dashboard names only metrics a real scrape has (issue 35)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import httpx
from controlplane_api.conftest import TOKEN, until
from prometheus_client.parser import text_string_to_metric_families

from .conftest import ROOT, SHIPPED

DASHBOARD = ROOT / "docs" / "grafana" / "astra.json"


def run(name: str, gpus: int, *args: str) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "task_template": {
                "image": "busybox",
                "command": "sh",
                "args": ["-c", *args],
                "restart_policy": "Never",
                "requested_resources": {"gpu_requests": {"count": gpus}},
            }
        },
    }


def settled(server) -> dict:
    """Runs on the server: one holding 2 GPUs, an array of two copies one at a time (one holds a
    GPU, one waits), one failed, one waiting for room (all 128 GPUs); and a source that reported."""
    sweep = run("sweep", 1, "sleep 600")
    sweep["spec"]["array"] = {"size": 2, "max_parallel": 1}
    for spec in (run("hold", 2, "sleep 600"), run("fails", 1, "exit 3"), sweep, run("waits", 128, "true")):
        assert server.api("POST", "/runs", json=spec).status_code == 201
    server.api("PUT", "/sources/site", json={"status": {}})
    server.api("PUT", "/sources/site/status", json={"state": "Ready", "updated_at": 1.0})
    lock = server.api("POST", "/sources/site/lock", json={"id": "t1"}).json()["id"]
    applied = {"when": 2.0, "result": "applied", "summary": {"create": 4}}
    assert server.api("POST", "/sources/site/history", json=applied, params={"lock": lock}).status_code == 201
    server.api("DELETE", "/sources/site/lock", params={"lock": lock})

    def states():
        return {
            r["metadata"]["name"]: r["status"]["state"] for r in server.api("GET", "/runs").json()["items"]
        }

    expected = {"hold": "Running", "fails": "Failed", "sweep": "Running", "waits": "Pending"}
    until(lambda: states() == expected, what=f"the runs to be {expected}")
    return states()


def test_prometheus_scrapes_the_server_and_its_figures_are_the_api_s(scraped):
    server, prometheus = scraped
    states = settled(server)
    running = server.api("GET", "/tasks", params={"state": "Running"}).json()["items"]
    gpus = server.api("GET", "/workspaces/default").json()["usage"]["gpus"]
    failed = sum(1 for s in states.values() if s == "Failed")
    asked = {
        'sum(astra_workers{state="Running"})': len(running),
        "sum(astra_machine_gpus_allocated)": gpus,
        'sum(astra_workspace_gpus_allocated{workspace="default"})': gpus,
        'sum(astra_runs{state="Failed"})': failed,
        'up{job="astra"}': 1,
    }
    assert (len(running), gpus, failed) == (2, 3, 1)
    for promql, expected in asked.items():
        until(lambda q=promql, x=expected: prometheus.value(q) == x, what=f"{promql} to be {expected}")
    targets = httpx.get(prometheus.url + "/api/v1/targets", timeout=10).json()["data"]["activeTargets"]
    assert [(t["labels"]["job"], t["health"]) for t in targets] == [("astra", "up")]


def promtool(*args: str, cwd) -> subprocess.CompletedProcess:
    tool = shutil.which("promtool")
    assert tool is not None, "promtool is not installed: run `task prometheus:up` (as root)"
    return subprocess.run([tool, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_promtool_checks_the_shipped_rules_and_their_tests_pass(tmp_path):
    checked = promtool("check", "rules", str(SHIPPED / "alerts.yml"), cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 6 rules found" in checked.stdout
    shutil.copy(SHIPPED / "alerts.yml", tmp_path / "alerts.yml")
    shutil.copy(ROOT / "tests" / "prometheus" / "alerts_test.yml", tmp_path / "alerts_test.yml")
    tested = promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr


# ---- the dashboard -------------------------------------------------------------------------------

#: Words of PromQL that are not metric names.
KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool"})
KEYWORDS |= {"and", "or", "unless", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: its identifiers less functions, keywords,
    label matchers, ranges and the labels of ``by (…)``."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", "", e)
    e = re.sub(r"\[[^\]]*\]", "", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    names = set()
    for m in re.finditer(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*", e):
        if m.group() not in KEYWORDS and not e[m.end() :].lstrip().startswith("("):
            names.add(m.group())
    return names


def expressions(dashboard: dict) -> list[str]:
    """Every PromQL expression of the dashboard: its panels' targets and its variables' queries,
    with Grafana's variables given values Prometheus takes."""
    found = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for v in dashboard["templating"]["list"]:
        if v["type"] == "query":
            query = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            inner = re.fullmatch(r"label_values\((.+), *\w+\)", query)
            found.append(inner.group(1) if inner else query)
    return [e.replace("$workspace", ".*").replace("$__rate_interval", "1m") for e in found]


def test_metric_names_are_told_from_functions_labels_and_keywords():
    expr = 'histogram_quantile(0.99, sum by (le, route) (rate(a_bucket{route=~"x"}[5m]))) / on (x) b'
    assert metric_names(expr) == {"a_bucket", "b"}
    assert metric_names("time() - max by (source) (c_seconds)") == {"c_seconds"}


def test_every_dashboard_expression_names_only_metrics_a_real_scrape_has(scraped):
    server, prometheus = scraped
    if not server.api("GET", "/runs/hold").is_success:  # run alone, not after the test above
        settled(server)
    text = httpx.get(server.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).text
    exported = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = expressions(dashboard)
    assert len(exprs) >= 20
    for expr in exprs:
        unknown = metric_names(expr) - exported
        assert not unknown, f"{expr} reads {sorted(unknown)}, which /metrics does not export"
        prometheus.query(expr)  # and Prometheus takes it
    panels_with_data = [e for e in exprs if "rate(" not in e and "delta(" not in e and "increase(" not in e]
    for expr in panels_with_data:
        until(lambda q=expr: prometheus.query(q)["result"], what=f"{expr} to have data")
