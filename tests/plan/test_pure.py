"""The pure layer: normalize, the three-way diff, action_for, the plan's rules, its JSON form."""

from __future__ import annotations

import copy
import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.clusters.base import LiveRun, WorkerInfo
from reconciler.plan import (
    ABSENT,
    Action,
    DesiredItem,
    PlanError,
    action_for,
    build_plan,
    compare,
    cost_of,
    describe_cost,
    digest,
    forces_replace,
    normalize,
    plan_from_json,
    plan_to_json,
    render_plan,
)
from reconciler.runspec.normalize import DIGEST_VERSION, digest_owned, normalized_digest
from reconciler.state import InventoryEntry

NOW = 1_700_000_000.0


def doc(name="train", **spec):
    base = {"task_template": {"image": "python:3.12", "command": "python"}}
    base.update(spec)
    return {"metadata": {"name": name}, "spec": base}


def live(document, *, state="Pending", rv=1, **kw) -> LiveRun:
    return LiveRun(document["metadata"]["name"], document, rv, state, **kw)


# ---- normalize -----------------------------------------------------------------------------------


def test_normalize_fills_defaults_and_drops_server_fields():
    raw = {
        "metadata": {"name": "a", "resource_version": 7, "uid": "x", "labels": {}},
        "spec": {
            "policy": "Gang",
            "task_template": {
                "image": "i",
                "requested_resources": {"memory_bytes": "120Gi", "cpu_cores": 2.0},
                "time_limit_seconds": "1h30m",
                "datavolume_refs": [{"name": "d", "mount_path": "/d"}],
            },
        },
        "status": {"state": "Running"},
        "task_counts": {"Running": 1},
    }
    n = normalize(raw)
    assert n == {
        "metadata": {"name": "a"},
        "spec": {
            "lifetime": "Batch",
            "start": "Gang",
            "task_template": {
                "datavolume_refs": [{"mode": "ReadWrite", "mount_path": "/d", "name": "d"}],
                "image": "i",
                "requested_resources": {"cpu_cores": 2, "memory_bytes": 128849018880},
                "restart_policy": "OnFailure",
                "time_limit_seconds": 5400,
            },
        },
    }
    assert normalize(n) == n  # idempotent


def test_normalize_groups_and_keeps_empty_lists():
    raw = doc(task_template=None, task_groups=[{"name": "w", "task_template": {"image": "i", "args": []}}])
    n = normalize(raw)
    group = n["spec"]["task_groups"][0]
    assert group["replicas"] == 1
    assert group["task_template"]["restart_policy"] == "OnFailure"
    assert group["task_template"]["args"] == []
    assert "task_template" not in n["spec"]


def test_normalize_same_meaning_same_form():
    a = doc(task_template={"image": "i", "requested_resources": {"memory_bytes": "1Gi"}})
    b = doc(
        lifetime="Batch",
        task_template={
            "image": "i",
            "restart_policy": "OnFailure",
            "requested_resources": {"memory_bytes": 1073741824},
        },
    )
    assert normalize(a) == normalize(b)


_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),  # past 64 bits too
    st.floats(allow_nan=False),  # infinities, 1e-05 (whose shortest forms differ), 2.0
    st.text(max_size=4),
    st.sampled_from(["12h", "120Gi", "1.5", ""]),
)
_KEYS = st.one_of(
    st.sampled_from(
        ["memory_bytes", "time_limit_seconds", "policy", "start", "task_template", "task_groups"]
    ),
    st.sampled_from(["restart_policy", "datavolume_refs", "mode", "replicas"]),
    st.text(max_size=3),
)
_TREE = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(_KEYS, inner, max_size=4),
        st.dictionaries(st.integers(0, 3), inner, min_size=1, max_size=2),  # no canonical JSON
        st.tuples(inner),
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(
    st.fixed_dictionaries(
        {
            "metadata": st.dictionaries(st.sampled_from(["name", "labels", "annotations", "uid"]), _TREE),
            "spec": _TREE,
        }
    )
)
def test_the_digest_made_with_normalize_is_the_definitions(document):
    """``normalized_digest`` and ``digest_owned`` (orjson, for the load) are ``normalize`` and
    ``digest`` (json.dumps)."""
    normalized = normalize(document)
    assert normalized_digest(document) == (normalized, digest(normalized))
    assert digest_owned(copy.deepcopy(document)) == digest(normalized)  # cleaned in place: the same


def test_a_fractional_float_is_digested_as_json_writes_it():
    d = doc(task_template={"image": "i", "gpu": {"min_memory_gb": 1e-05}})
    text = '{"metadata":{"name":"train"},"spec":{"lifetime":"Batch","task_template":'
    text += '{"gpu":{"min_memory_gb":1e-05},"image":"i","restart_policy":"OnFailure"}}}'
    assert normalized_digest(d)[1] == f"{DIGEST_VERSION}:{hashlib.sha256(text.encode()).hexdigest()}"
    assert digest_owned(d) == normalized_digest(d)[1]


def test_normalize_keeps_what_it_cannot_read_of_a_spec_not_of_a_runs_shape():
    n = normalize(doc(task_groups=5, task_template={"image": "i", "datavolume_refs": "d"}))
    assert n["spec"]["task_groups"] == 5
    assert n["spec"]["task_template"]["datavolume_refs"] == "d"
    assert normalized_digest(doc(task_groups=5))[1] is not None


# ---- action_for, forces_replace ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "action"),
    [
        (None, None, Action.noop),
        (None, {"a": 1}, Action.create),
        ({"a": 1}, None, Action.delete),
        ({"a": 1}, {"a": 1}, Action.noop),
        ({"a": 1}, {"a": 2}, Action.update),
        ({"a": 1}, {"a": True}, Action.update),  # 1 is not true
    ],
)
def test_action_for_is_total(before, after, action):
    assert action_for(before, after) is action


@pytest.mark.parametrize(
    ("steps", "forces"),
    [
        (("metadata", "labels", "team"), False),
        (("metadata", "annotations"), False),
        (("spec", "array", "max_parallel"), False),
        (("spec", "priority"), False),
        (("spec", "array", "size"), True),
        (("spec", "start"), True),
        (("spec", "task_template", "image"), True),
        (("spec", "task_groups", 0, "replicas"), True),
        (("spec", "something_new"), True),  # unknown: replace
    ],
)
def test_forces_replace(steps, forces):
    assert forces_replace(steps) is forces


# ---- the three-way diff --------------------------------------------------------------------------


def test_compare_ignores_fields_only_the_cluster_set():
    desired = normalize(doc())
    server = normalize(doc(start="Independent", on_failure="RestartTask"))
    before, fields = compare(desired, server, desired)
    assert fields == []
    assert action_for(before, desired) is Action.noop


def test_compare_user_change_versus_drift():
    last = normalize(doc(priority=1, array={"size": 4, "max_parallel": 2}))
    desired = normalize(doc(priority=1, array={"size": 4, "max_parallel": 3}))
    on_cluster = normalize(doc(priority=9, array={"size": 4, "max_parallel": 2}))
    _, fields = compare(desired, on_cluster, last)
    by_path = {f.path: f for f in fields}
    assert set(by_path) == {"spec.array.max_parallel", "spec.priority"}
    assert by_path["spec.array.max_parallel"].drift is False
    assert (by_path["spec.priority"].before, by_path["spec.priority"].after) == (9, 1)
    assert by_path["spec.priority"].drift is True


def test_compare_removed_field_and_lists_item_by_item():
    last = normalize(doc(priority=1, task_template={"image": "i", "args": ["a", "b"]}))
    desired = normalize(doc(task_template={"image": "i", "args": ["a", "c"]}))
    _, fields = compare(desired, last, last)
    assert [(f.path, f.before, f.after) for f in fields] == [
        ("spec.priority", 1, ABSENT),
        ("spec.task_template.args[1]", "b", "c"),
    ]


# ---- the plan's rules ----------------------------------------------------------------------------


def plan(desired=(), lives=(), inventory=None, **kw):
    return build_plan(
        source="s",
        cluster="fake://",
        desired={d["metadata"]["name"]: DesiredItem(d["metadata"]["name"], d, "f.yaml") for d in desired},
        live={r.name: r for r in lives},
        inventory=inventory or {},
        now=NOW,
        **kw,
    )


def entry(d):
    return InventoryEntry(normalize(d), NOW - 100, "f.yaml")


def test_create_and_planned_back():
    d = doc()
    assert plan([d]).changes[0].action is Action.create
    back = plan([d], inventory={"train": entry(d)}).changes[0]
    assert back.action is Action.create and "planned back" in back.reason


def test_in_place_versus_replace():
    old, new = doc(priority=1), doc(priority=5)
    change = plan([new], [live(old)], {"train": entry(old)}).changes[0]
    assert change.action is Action.update and change.forces_replace == ()
    new = doc(priority=5, task_template={"image": "python:3.13", "command": "python"})
    change = plan([new], [live(old)], {"train": entry(old)}).changes[0]
    assert change.action is Action.replace
    assert change.forces_replace == ("spec.task_template.image",)


def test_finished_runs_stay_or_rerun():
    d = doc()
    done = live(d, state="Completed", finished_at=NOW - 7200)
    stays = plan([d], [done], {"train": entry(d)}).changes[0]
    assert stays.action is Action.noop
    changed = doc(task_template={"image": "python:3.13", "command": "python"})
    rerun = plan([changed], [done], {"train": entry(d)}).changes[0]
    assert rerun.action is Action.replace and rerun.reason == "reruns"
    assert describe_cost(rerun.cost, "replace").startswith("reruns: the run Completed 2h ago")
    # a finished run's labels change in place: nothing reruns for a label
    labelled = {**d, "metadata": {"name": "train", "labels": {"team": "a"}}}
    assert plan([labelled], [done], {"train": entry(d)}).changes[0].action is Action.update
    # nor for a field that changes in place: a finished run's priority is updated, not rerun
    reprioritised = {**d, "spec": {**d["spec"], "priority": 5}}
    updated = plan([reprioritised], [done], {"train": entry(d)}).changes[0]
    assert updated.action is Action.update
    assert updated.reason == "finished: updated in place, not rerun"


def test_prune_only_with_flag_and_only_inventory():
    d, other = doc(), doc("theirs")
    lives = [live(d), live(other)]
    kept = plan([], lives, {"train": entry(d)}, allow_empty=True)
    assert kept.changes == () and kept.not_pruned == ("train",)
    pruned = plan([doc("new")], lives, {"train": entry(d)}, prune=True)
    assert {c.address: c.action for c in pruned.changes} == {"new": Action.create, "train": Action.delete}
    with pytest.raises(PlanError, match="--allow-empty"):
        plan([], lives, {"train": entry(d)}, prune=True)
    assert plan([], lives, {"train": entry(d)}, prune=True, allow_empty=True).count(Action.delete) == 1


def test_cost_from_workers():
    d = doc()
    run = live(d, state="Running")
    workers = [
        WorkerInfo("train-0", 0, "Running", "", gpus=8, started_at=NOW - 3600 * 2 - 60 * 13),
        WorkerInfo("train-1", 1, "Running", "", gpus=8, started_at=NOW - 60 * 5),
        WorkerInfo("train-2", 2, "Pending", "", gpus=8),
    ]
    cost = cost_of(run, workers, NOW)
    assert (cost.workers, cost.gpus) == (2, 16)
    assert describe_cost(cost, "replace") == (
        "stops 2 workers and 16 GPUs that had run for 5m to 2h 13m (about 18 GPU-hours of work)"
    )


def test_json_round_trip_and_renderer_reads_only_json():
    old = doc(priority=1)
    p = plan([doc(priority=2), doc("new")], [live(old)], {"train": entry(old)})
    data = plan_to_json(p)
    assert data["format_version"] == "2"
    again = plan_from_json(data)
    assert plan_to_json(again) == data
    assert render_plan(data) == render_plan(plan_to_json(again))
    with pytest.raises(PlanError, match="format_version"):
        plan_from_json({**data, "format_version": "0"})
