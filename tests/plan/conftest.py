"""The plan tests' world: a folder of run specs, a fake cluster keeping the source's state, a fixed clock."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import stamina

from reconciler.apply import apply_plan
from reconciler.clusters.fake import FakeCluster
from reconciler.load import FileCache, load_source
from reconciler.plan import Plan, plan_to_json, render_apply, render_plan
from reconciler.reconcile import Source, make_plan

NOW = 1_700_000_000.0

RUN = """\
metadata:
  name: {name}
spec:
  task_template:
    image: {image}
    command: python
    args: [train.py]
    requested_resources:
      gpu_requests:
        count: {gpus}
"""

SWEEP = """\
metadata:
  name: {name}
spec:
  array:
    size: {size}
    max_parallel: {parallel}
  task_template:
    image: python:3.12
    command: python
    args: [sweep.py]
    time_limit_seconds: 1h
    requested_resources:
      memory_bytes: 32Gi
"""


@pytest.fixture(autouse=True)
def _no_retry_waits():
    stamina.set_testing(True, attempts=3)
    yield
    stamina.set_testing(False)


class World:
    """Files under ``runs/`` (the current directory is a fresh folder), a fake cluster, a clock."""

    def __init__(self, root: Path):
        self.root = root
        self.now = NOW
        self.cluster = FakeCluster(now=lambda: self.now)
        self.store = self.cluster.source_store()
        self.cache = FileCache(root / ".astra" / "cache")
        (root / "runs").mkdir()

    def write(self, name: str, text: str) -> Path:
        path = Path("runs") / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    def run(self, name: str, *, image: str = "python:3.12", gpus: int = 1, file: str | None = None) -> Path:
        return self.write(file or f"{name}.yaml", RUN.format(name=name, image=image, gpus=gpus))

    def sweep(self, name: str, *, size: int = 10, parallel: int = 2) -> Path:
        return self.write(f"{name}.yaml", SWEEP.format(name=name, size=size, parallel=parallel))

    def source(
        self, *, prune: bool = False, allow_empty: bool = False, paths=("runs",), replace=()
    ) -> Source:
        return Source("test", tuple(paths), prune=prune, allow_empty=allow_empty, replace=tuple(replace))

    def plan(self, **kwargs) -> Plan:
        """The plan by both paths, the slow one (normalise and compare every run) and the fast
        one (digests): they must give the same plan JSON; the fast one is returned."""
        source = self.source(**kwargs)
        loaded = load_source(source.paths, cache=self.cache)
        slow = make_plan(source, loaded, self.cluster, self.store, self.now, fast=False)
        fast = make_plan(source, loaded, self.cluster, self.store, self.now, fast=True)
        assert as_json(fast) == as_json(slow)
        return fast

    def apply(self, plan: Plan | None = None, **kwargs):
        plan = plan or self.plan(**kwargs)
        return apply_plan(plan, self.cluster, self.store, now=lambda: self.now, who="tester@host:1")

    def converge(self, **kwargs):
        result = self.apply(**kwargs)
        assert result.ok, result.to_json()
        return result


def as_text(plan: Plan, verbose: bool = False) -> str:
    return render_plan(plan_to_json(plan), verbose=verbose)


def as_json(plan: Plan) -> str:
    return json.dumps(plan_to_json(plan), indent=2, sort_keys=True)


def apply_text(result) -> str:
    return render_apply(result.to_json())


@pytest.fixture
def world(tmp_path, monkeypatch) -> World:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ASTRA_HOME", str(tmp_path / ".astra"))
    monkeypatch.delenv("ASTRA_TEMPLATE_PATH", raising=False)
    monkeypatch.delenv("ASTRA_SERVER", raising=False)
    return World(tmp_path)
