"""Diff and plan: pure functions from desired, live and last-applied runs to a ``Plan``.

* ``normalize``: the comparable form of a run document (defaults filled, server fields dropped),
  and ``digest``, its canonical digest; both live in ``reconciler.runspec.normalize``, where the
  control plane digests the documents it holds with them (``GET /runs?view=summary``);
* ``pair``, ``compare``: match runs by name; the three-way diff of one run;
* ``action_for``, ``Action``, ``Change``, ``Plan``: what a plan is, and its JSON form;
* ``build_plan``: the plan for one source (``unchanged``: runs whose three digests are one,
  noops without ``compare``);
* ``render_plan``, ``render_apply``: text, read from the JSON forms only.

Nothing here reads a file, a clock or a cluster: time and inventory come in as arguments.
"""

from __future__ import annotations

from .build import Applied, DesiredItem, build_plan, in_scope, stopping
from .cost import cost_of, describe_ask, describe_cost, describe_spend, duration_words, impossible_ask
from .diff import compare, pair
from .model import (
    ABSENT,
    FORMAT_VERSION,
    IN_PLACE_FIELDS,
    Action,
    Change,
    Cost,
    FieldChange,
    Plan,
    PlanError,
    Resource,
    action_for,
    forces_replace,
    plan_from_json,
    plan_to_json,
    same,
)
from .normalize import digest, normalize, spec_digest
from .render import SYMBOLS, render_apply, render_plan, summary_line

__all__ = [
    "ABSENT",
    "FORMAT_VERSION",
    "IN_PLACE_FIELDS",
    "SYMBOLS",
    "Action",
    "Applied",
    "Change",
    "Cost",
    "DesiredItem",
    "FieldChange",
    "Plan",
    "PlanError",
    "Resource",
    "action_for",
    "build_plan",
    "compare",
    "cost_of",
    "describe_ask",
    "describe_cost",
    "describe_spend",
    "digest",
    "duration_words",
    "forces_replace",
    "impossible_ask",
    "in_scope",
    "normalize",
    "pair",
    "plan_from_json",
    "plan_to_json",
    "render_apply",
    "render_plan",
    "same",
    "spec_digest",
    "stopping",
    "summary_line",
]
