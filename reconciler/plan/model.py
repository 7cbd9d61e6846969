"""What a plan is: actions, changes, costs, and the plan's versioned JSON form.

A plan is data. ``Action`` is a closed enum; ``action_for(before, after)`` is the tiny total
function that names the action for two documents; only a caller that knows more (the plan
builder, which knows which fields force a replace and which runs finished) turns an update
into a replace. The *why* of a change (``reason``, ``cost``, which fields force a replace) is
for display only: apply follows ``action`` and never branches on the rest.

``plan_to_json`` / ``plan_from_json`` give the saved and printed form (``FORMAT_VERSION``); the
text renderer reads only that form. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from enum import StrEnum
from operator import attrgetter
from typing import Any

from ..runs import PlanError
from ..runspec.vocabulary import IN_PLACE_FIELDS, forces_replace, same

__all__ = [
    "ABSENT",
    "FORMAT_VERSION",
    "IN_PLACE_FIELDS",
    "Action",
    "Change",
    "Cost",
    "FieldChange",
    "Plan",
    "PlanError",
    "Resource",
    "action_for",
    "forces_replace",
    "plan_from_json",
    "plan_to_json",
    "quick_noop",
    "same",
]

#: The version of the plan's JSON form. "2": a noop may carry no documents (``before`` and
#: ``after`` null). ``plan_from_json`` reads ``READS`` (a "1" plan is a "2" plan whose noops all
#: carry theirs) and refuses any other.
FORMAT_VERSION = "2"
READS = ("1", "2")


class _Absent:
    """A field that is not there (distinct from ``null``)."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Any = _Absent()


#: What a change does: a closed set (made by the functional form, as a member named ``replace``
#: would stand where ``str.replace`` is in a class body).
Action = StrEnum("Action", "noop create update replace delete", module=__name__, qualname="Action")
#: Each action's word (``Action.value`` is a descriptor: ten times this lookup, per change).
_ACTION_TEXT = {a: a.value for a in Action}


def action_for(before: dict[str, Any] | None, after: dict[str, Any] | None) -> Action:
    """The action that turns ``before`` into ``after``; total and pure."""
    if before is None and after is None:
        return Action.noop
    if before is None:
        return Action.create
    if after is None:
        return Action.delete
    return Action.noop if same(before, after) else Action.update


@dataclass(frozen=True)
class FieldChange:
    """One field that differs: ``before`` is the live value, ``after`` the files' value.

    ``drift``: the files did not change this field since the last apply; the cluster did.
    """

    path: str
    before: Any = ABSENT
    after: Any = ABSENT
    forces_replace: bool = True
    drift: bool = False


@dataclass(frozen=True)
class Cost:
    """What stopping a run loses, as observed at plan time (``now`` passed in)."""

    state: str
    workers: int = 0
    gpus: int = 0
    ran_seconds_min: float | None = None
    ran_seconds_max: float | None = None
    gpu_seconds: float = 0.0
    finished_seconds_ago: float | None = None


@dataclass(frozen=True)
class Change:
    """One run's change. ``address`` is the run's name.

    ========  ===========  ===========
    action    before       after
    ========  ===========  ===========
    create    None         desired
    update    live         desired
    replace   live         desired
    delete    live         None
    noop      live         desired (equal); or both ``None`` when the live run, the last
                           apply and the files agree by digest and file: nothing to
                           send or record (``build._unchanged``)
    ========  ===========  ===========

    ``before`` is the live document as normalised, seen through the fields this source manages.
    ``resource_version`` is the live run's at plan time (``None`` when it does not exist).
    """

    address: str
    action: Action
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    fields: tuple[FieldChange, ...] = ()
    reason: str = ""
    cost: Cost | None = None
    file: str | None = None
    resource_version: int | None = None
    #: A create's or replace's fate if submitted at plan time, as the cluster answered it
    #: (``{"kind": "start"|"wait"|"fail", "words": …}``); ``None``: the cluster did not say.
    #: Display only: apply never reads it. In the JSON form only when known.
    outlook: dict[str, str] | None = None

    @property
    def forces_replace(self) -> tuple[str, ...]:
        """The paths of the fields that force a replace, sorted."""
        return tuple(sorted(f.path for f in self.fields if f.forces_replace)) if self.fields else ()


#: A noop's fields, but for its address, file, resource version and reason (``quick_noop``).
_NOOP = {
    **{f.name: f.default for f in fields(Change) if f.default is not MISSING},
    "action": Action.noop,
    "before": None,
    "after": None,
}


def quick_noop(
    address: str, file: str | None, resource_version: int | None, reason: str, document: dict[str, Any] | None
) -> Change:
    """The noop ``Change`` of one run (``document``: its ``before`` and ``after``, the same; none
    when there is nothing to send or record), made without the frozen class's ``__init__`` (which
    sets each of its ten fields through ``object.__setattr__``): a plan of 10,000 unchanged runs
    makes 10,000 of them (``build._unchanged``), in 5 ms rather than 16."""
    given = {**_NOOP, "address": address, "file": file, "resource_version": resource_version}
    if reason:
        given["reason"] = reason
    if document is not None:
        given["before"] = given["after"] = document
    change = object.__new__(Change)
    object.__setattr__(change, "__dict__", given)
    return change


@dataclass(frozen=True)
class Resource:
    """A secret's or an alert's change, declared in ``astra.yaml`` beside the runs
    (``plan.resources`` says the rules): ``kind`` (``secret``, ``alert``), ``name``, ``action``
    (``create``, ``update``, ``delete``), an alert's changed ``fields`` (never a secret's value:
    a secret has none), ``reason`` (display only), and ``after``: an alert's rule as it will be
    written (``None`` for a secret and a delete)."""

    kind: str
    name: str
    action: str
    fields: tuple[FieldChange, ...] = ()
    reason: str = ""
    after: dict[str, Any] | None = None


@dataclass(frozen=True)
class Plan:
    """Every change for one source, and what the plan was made against (to refuse it when stale).

    ``files``: each file the desired state was read from (run specs and templates) → its
    sha256. ``live``: each run the plan looked at → its resource version then (``None``: absent).
    ``not_pruned``: runs of this source no longer in the files, kept because ``--prune`` was
    not given. ``forget``: inventory entries of runs gone from both the files and the cluster.
    """

    source: str
    cluster: str
    created_at: float
    changes: tuple[Change, ...]
    files: dict[str, str] = field(default_factory=dict)
    live: dict[str, int | None] = field(default_factory=dict)
    prune: bool = False
    not_pruned: tuple[str, ...] = ()
    forget: tuple[str, ...] = ()
    #: What the files were: ``reconciler.git.Revision``'s JSON form (``id``: ``main@sha1:…``,
    #: ``dirty``, ``rollback``, the commit's subject and author), or ``{"id": "sha256:…"}`` for
    #: files in no repository; ``None`` when not known. Apply reads it for what it records, never
    #: to choose what it does: the history's commit and rollback note, the runs' ``astra.revision``
    #: annotation, and CI's refusal of a dirty tree (``apply.refuse_dirty``).
    revision: dict[str, Any] | None = None
    #: Replaces held until their run ends (``plan.held``): each a ``replace`` change whose
    #: ``reason`` says why it waits. Their runs are noops in ``changes``: apply never sees these.
    held: tuple[Change, ...] = ()
    #: The GPU-hour budget of the workspace the plan's creates go to, as the cluster said it
    #: (``{"workspace", "gpu_hours", "per", "left_gpu_hours"}``); ``None``: it has none, or did
    #: not say. Display only (a create's cost line). In the JSON form only when known.
    budget: dict[str, Any] | None = None
    #: The secrets and alerts astra.yaml declares for the source that change (``plan.resources``);
    #: in the JSON form only when there are some.
    resources: tuple[Resource, ...] = ()
    #: The alerts this source declared before and no longer does, kept for want of ``--prune``.
    resources_not_pruned: tuple[str, ...] = ()

    def count(self, action: Action) -> int:
        return sum(1 for c in self.changes if c.action is action)

    @property
    def has_changes(self) -> bool:
        return any(c.action is not Action.noop for c in self.changes) or bool(self.forget or self.resources)

    @property
    def summary(self) -> dict[str, int]:
        """How many changes of each action (every action named, in ``Action``'s order)."""
        counted = dict.fromkeys(Action, 0)
        for c in self.changes:
            counted[c.action] += 1
        return {_ACTION_TEXT[a]: n for a, n in counted.items()}


# ---- the JSON form ----------------------------------------------------------------------------


def _field_json(f: FieldChange) -> dict[str, Any]:
    out: dict[str, Any] = {"path": f.path, "forces_replace": f.forces_replace, "drift": f.drift}
    if f.before is not ABSENT:
        out["before"] = f.before
    if f.after is not ABSENT:
        out["after"] = f.after
    return out


def _change_json(c: Change) -> dict[str, Any]:
    fields = c.fields  # none, for nearly every change of a large plan (its noops)
    return {
        "address": c.address,
        "action": _ACTION_TEXT[c.action],
        "before": c.before,
        "after": c.after,
        "fields": [_field_json(f) for f in fields] if fields else [],
        "forces_replace": list(c.forces_replace) if fields else [],
        "reason": c.reason,
        "cost": None if c.cost is None else dict(sorted(c.cost.__dict__.items())),
        "file": c.file,
        "resource_version": c.resource_version,
        **({"outlook": c.outlook} if c.outlook is not None else {}),
    }


_ADDRESS = attrgetter("address")
_KIND_NAME = attrgetter("kind", "name")


def _sorted(resources: tuple[Resource, ...]) -> list[Resource]:
    return sorted(resources, key=_KIND_NAME)


def plan_to_json(plan: Plan) -> dict[str, Any]:
    """The plan's saved and printed form (keys sorted when dumped)."""
    return {
        "format_version": FORMAT_VERSION,
        "source": plan.source,
        "cluster": plan.cluster,
        "created_at": plan.created_at,
        "prune": plan.prune,
        "files": dict(sorted(plan.files.items())),
        "live": dict(sorted(plan.live.items())),
        "changes": [_change_json(c) for c in sorted(plan.changes, key=_ADDRESS)],
        "not_pruned": sorted(plan.not_pruned),
        "forget": sorted(plan.forget),
        "summary": plan.summary,
        **({"revision": plan.revision} if plan.revision is not None else {}),
        **({"held": [_change_json(c) for c in sorted(plan.held, key=_ADDRESS)]} if plan.held else {}),
        **({"budget": plan.budget} if plan.budget is not None else {}),
        **(
            {"resources": [_resource_json(r) for r in sorted(plan.resources, key=_KIND_NAME)]}
            if plan.resources
            else {}
        ),
        **({"resources_not_pruned": sorted(plan.resources_not_pruned)} if plan.resources_not_pruned else {}),
    }


def _resource_json(r: Resource) -> dict[str, Any]:
    fields = []
    for f in r.fields:
        fields.append(
            {
                "path": f.path,
                **({"before": f.before} if f.before is not ABSENT else {}),
                **({"after": f.after} if f.after is not ABSENT else {}),
            }
        )
    return {
        "kind": r.kind,
        "name": r.name,
        "action": r.action,
        "fields": fields,
        "reason": r.reason,
        "after": r.after,
    }


def _resource_from(r: dict[str, Any]) -> Resource:
    fields = tuple(
        FieldChange(f["path"], f.get("before", ABSENT), f.get("after", ABSENT), forces_replace=False)
        for f in r["fields"]
    )
    return Resource(str(r["kind"]), str(r["name"]), str(r["action"]), fields, str(r["reason"]), r["after"])


def plan_from_json(data: Any) -> Plan:
    """A plan read back from its JSON form; ``PlanError`` if it is not one this version reads."""
    if not isinstance(data, dict) or "format_version" not in data:
        raise PlanError("not a saved plan: no format_version")
    if data["format_version"] not in READS:
        raise PlanError(
            f"the plan's format_version is {data['format_version']!r}; this astra reads "
            + " and ".join(repr(v) for v in READS)
        )
    try:
        changes = tuple(_change_from(c) for c in data["changes"])
        return Plan(
            source=data["source"],
            cluster=data["cluster"],
            created_at=data["created_at"],
            changes=changes,
            files=dict(data["files"]),
            live=dict(data["live"]),
            prune=bool(data["prune"]),
            not_pruned=tuple(data["not_pruned"]),
            forget=tuple(data["forget"]),
            revision=data.get("revision"),
            held=tuple(_change_from(c) for c in data.get("held", ())),
            budget=data.get("budget"),
            resources=tuple(_resource_from(r) for r in data.get("resources", ())),
            resources_not_pruned=tuple(data.get("resources_not_pruned", ())),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanError(f"the saved plan is damaged: {type(exc).__name__}: {exc}") from exc


def _change_from(c: dict[str, Any]) -> Change:
    """One change read back from its JSON form (``KeyError``, ``TypeError``, ``ValueError`` when
    it is not one)."""
    return Change(
        address=c["address"],
        action=Action(c["action"]),
        before=c["before"],
        after=c["after"],
        fields=tuple(
            FieldChange(
                f["path"],
                f.get("before", ABSENT),
                f.get("after", ABSENT),
                bool(f["forces_replace"]),
                bool(f["drift"]),
            )
            for f in c["fields"]
        ),
        reason=c["reason"],
        cost=None if c["cost"] is None else Cost(**c["cost"]),
        file=c["file"],
        resource_version=c["resource_version"],
        outlook=c.get("outlook"),
    )
