"""astra: a declarative, GitOps-style reconciler for runs on an Astraeus GPU cluster.

The public surface, what the ``astra`` commands do, each in one call::

    import reconciler as astra

    checked = astra.validate(["runs/"])              # validate: every problem of every file
    source = astra.Source("team-a", ("runs/",), prune=True)
    loaded = astra.load_source(source.paths)         # load: the desired runs, or every problem
    plan = astra.plan_source(source, cluster, store, time.time())           # load, observe, plan
    done = astra.apply_source(source, cluster, store)                        # plan and apply
    result = astra.apply_plan(plan, cluster, store, now=time.time, who="me") # apply a plan as it is

* ``validate(paths, template=, sets=) -> Checked``: what ``astra validate`` reports (``.errors``:
  each ``FieldError`` with its file, line, column, path and message; ``reconciler.check.check``);
* ``load_source(paths, template=, sets=, cache=) -> Loaded``: the files' desired runs
  (``.runs``) or every problem (``.errors``; ``.ok``);
* ``plan_source(source, cluster, store, now, cache=) -> Plan``: what ``astra plan`` does
  (``LoadFailed`` when the files do not load; ``reconcile.load_and_plan`` gives the ``Loaded``
  too); ``Plan`` is plain, versioned data
  (``reconciler.plan.plan_to_json``);
* ``apply_source(source, cluster, store, plan=, dry_run=) -> SourceApplied``: what
  ``astra apply --yes`` does (``reconciler.apply.locked``, ``plan_source`` and
  ``apply.apply_locked``: the three calls the CLI makes, showing the plan and asking between
  them); ``apply_plan(plan, cluster, store, now=, who=) -> ApplyResult``: carry one plan out,
  under the source's lock;
* ``Source``: a name, the paths of its files and how to read and prune them.

A cluster is any ``reconciler.clusters.Cluster`` (``reconciler.clusters.http.HttpCluster``,
``reconciler.clusters.slurm.SlurmCluster``, ``reconciler.clusters.fake.FakeCluster``); a store
is a ``reconciler.state.SourceStore`` (``reconciler.state.open_store(url, cluster)``).

Each name is imported when first used, so ``import reconciler`` stays cheap (the CLI's start-up
path imports it). ``reconciler.runspec`` is the root every other part reads.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .apply import ApplyResult, SourceApplied, apply_plan, apply_source
    from .check import Checked
    from .check import check as validate
    from .load import Loaded, load_source
    from .plan import Plan, PlanError
    from .reconcile import LoadFailed, Source, StalePlan, plan_source

__all__ = [
    "ApplyResult",
    "Checked",
    "LoadFailed",
    "Loaded",
    "Plan",
    "PlanError",
    "Source",
    "SourceApplied",
    "StalePlan",
    "__version__",
    "apply_plan",
    "apply_source",
    "load_source",
    "plan_source",
    "validate",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """A public name, imported from its home on first use (then kept here)."""
    home: ModuleType
    if name in ("ApplyResult", "SourceApplied", "apply_plan", "apply_source"):
        from . import apply as home
    elif name == "validate":
        from .check import check

        globals()[name] = check
        return check
    elif name == "Checked":
        from . import check as checking

        home = checking
    elif name in ("Loaded", "load_source"):
        from . import load as loading

        home = loading
    elif name in ("Plan", "PlanError"):
        from . import plan as planning

        home = planning
    elif name in ("LoadFailed", "Source", "StalePlan", "plan_source"):
        from . import reconcile

        home = reconcile
    else:
        raise AttributeError(f"module 'reconciler' has no attribute {name!r}")
    value = getattr(home, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
