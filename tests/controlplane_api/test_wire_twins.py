"""The client's decoders (``reconciler.clusters.decoders``) are the wire models' pydantic-free twins.

``astra plan`` imports no pydantic, so the client reads answers with plain decoders; the shapes
are stated once, in ``reconciler.wire.models``. Here each decoder is held to its model, on
answers generated from the model itself: it reads no key the model does not name (but the few
fallbacks it keeps for other control planes), and it decodes what the model accepts to the
values the model reads.
"""

from __future__ import annotations

import types
from enum import Enum
from typing import Any, Union, get_args, get_origin

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from reconciler.clusters import decoders
from reconciler.clusters.base import LiveRun, RunSummary, WorkerInfo
from reconciler.state import InventoryEntry, Lock
from reconciler.wire import models as wire

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
NAMES = st.from_regex(r"\A[a-z]([-a-z0-9]{0,10}[a-z0-9])?\Z")


def answers(model: type[BaseModel]) -> st.SearchStrategy[dict[str, Any]]:
    """Answers of ``model``'s shape, every field given (as the server sends them)."""
    if issubclass(model, wire.RunMetadata):  # the spec layer's metadata: a name of its pattern
        return st.fixed_dictionaries({"name": NAMES, "resource_version": st.integers(0, 2**40)})
    return st.fixed_dictionaries({k: of_type(f.annotation) for k, f in model.model_fields.items()})


def of_type(tp: Any) -> st.SearchStrategy[Any]:
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        return st.one_of(*(of_type(a) for a in args))
    if origin is dict:
        return st.dictionaries(st.text(max_size=8), of_type(args[1]), max_size=3)
    if origin is list:
        return st.lists(of_type(args[0]), max_size=3)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return answers(tp)
    if isinstance(tp, type) and issubclass(tp, Enum):
        return st.sampled_from([str(v) for v in tp])
    simple = {
        str: st.text(max_size=12),
        int: st.integers(0, 2**40),
        float: st.floats(0, 4e9, allow_nan=False),
        bool: st.booleans(),
        type(None): st.none(),
        Any: JSON,
    }
    return simple[tp]


class Recording(dict):
    """A dict that notes every key read from it, under its path, in ``read``."""

    def __init__(self, data: dict[str, Any], read: set[str], at: str = "") -> None:
        super().__init__(data)
        self.read, self.at = read, at

    def __getitem__(self, key: str) -> Any:
        self.read.add(self.at + key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(self.at + key)
        return super().get(key, default)


def fields(model: type[BaseModel], at: str = "") -> set[str]:
    return {at + k for k in model.model_fields}


@SETTINGS
@given(answers(wire.RunSummary))
def test_the_summary_decoder_is_the_run_summary_model(data):
    m = wire.RunSummary.model_validate(data)
    assert decoders.summary_of(data) == RunSummary(
        m.name, m.resource_version, str(m.state), m.spec_digest or None
    )
    read: set[str] = set()
    decoders.summary_of(Recording(data, read))
    assert read == fields(wire.RunSummary)


@SETTINGS
@given(answers(wire.Run))
def test_the_run_decoder_is_the_run_model(data):
    m = wire.Run.model_validate(data)
    assert decoders.live_of(data) == LiveRun(
        name=m.metadata.name,
        document={"metadata": data["metadata"], "spec": m.spec},
        resource_version=m.metadata.resource_version,
        state=str(m.status.state),
        reason=m.status.reason,
        task_counts=m.task_counts,
        created_at=m.status.created_at,
        started_at=m.status.started_at,
        finished_at=m.status.finished_at,
        workers_running=m.status.workers_running,
        gpus_held=m.status.gpus_held,
        schedule=None if m.status.schedule is None else m.status.schedule.model_dump(),
    )
    read: set[str] = set()
    recorded = {
        **data,
        "metadata": Recording(data["metadata"], read, "metadata."),
        "status": Recording(data["status"], read, "status."),
    }
    decoders.live_of(Recording(recorded, read))
    known = fields(wire.Run) | fields(wire.RunMetadata, "metadata.") | fields(wire.RunStatus, "status.")
    fallbacks = {"metadata.created_at", "status.task_counts"}  # where other control planes put them
    assert read - known <= fallbacks


@SETTINGS
@given(answers(wire.Worker))
def test_the_worker_decoder_is_the_worker_model(data):
    m = wire.Worker.model_validate(data)
    assert decoders.worker_of(data) == WorkerInfo(
        name=m.name,
        rank=m.rank,
        state=str(m.state),
        reason=m.reason,
        machine=m.machine,
        exit_code=m.exit_code,
        restarts=m.restarts,
        gpus=m.gpus,
        started_at=m.started_at,
        group=m.group,
    )
    read: set[str] = set()
    decoders.worker_of(Recording(data, read))
    assert read <= fields(wire.Worker)


@SETTINGS
@given(st.lists(answers(wire.Problem), min_size=1, max_size=4))
def test_a_refusal_is_read_as_the_problems_model(data):
    m = wire.Problems.model_validate(data)
    response = httpx.Response(422, json=data)
    assert decoders.errors_of(response) == [p.model_dump() for p in m.root]
    said = "; ".join(": ".join(x for x in (p.path, p.message) if x) for p in m.root)
    assert decoders.detail_of(response) == said  # each problem, where and what


@SETTINGS
@given(answers(wire.LockHeld))
def test_an_error_in_words_is_read_as_the_detail_model(data):
    m = wire.LockHeld.model_validate(data)
    assert decoders.detail_of(httpx.Response(409, json=data)) == m.detail


@SETTINGS
@given(answers(wire.InventoryEntry), answers(wire.Lock))
def test_an_inventory_entry_and_a_lock_are_read_as_their_models(entry, lock):
    """The source state's decoders (``reconciler.state``), which the client reads answers with."""
    e = wire.InventoryEntry.model_validate(entry)
    assert InventoryEntry.from_json(entry) == InventoryEntry(
        e.spec, e.applied_at, e.file, e.digest or InventoryEntry.from_json({"spec": e.spec}).digest
    )
    read: set[str] = set()
    InventoryEntry.from_json(Recording(entry, read))
    assert read <= fields(wire.InventoryEntry)
    lk = wire.Lock.model_validate(lock)
    assert Lock.from_json(lock) == Lock(lk.id, lk.owner, lk.created_at, lk.host, lk.pid, lk.started)
