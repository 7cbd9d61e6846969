"""Runs that wait for runs (``spec.depends_on``): whether a run may be placed yet, and why not.

Owns: ``blocked_by(state, run)``: ``None`` when every run it depends on (in its own workspace:
the same scope's key) has ended as its ``when`` asks; else the words it waits with (``Waiting
for run preprocess (Running)``, or ``(not created yet)``: a run made later in the same apply is
waited for) and whether the wait can never end: a dependency that ended otherwise (``Run
preprocess ended Failed; this run needs it Completed``), or a cycle of runs waiting for each
other (``Runs a, b wait for each other``). The queue holds the run with the words, or fails it.

Must not touch: the records (the queue emits), clocks, I/O.
"""

from __future__ import annotations

from reconciler.runspec.lifecycle import WHEN_MET, dependency_unmet, waiting_for_run
from reconciler.runspec.vocabulary import FINAL_RUN_STATES

from ..scopes import run_key, scope_of, shown
from .records import RunRecord
from .state import ClusterState

__all__ = ["Blocked", "blocked_by"]

#: (the words, whether the wait can never end)
Blocked = tuple[str, bool]


def blocked_by(s: ClusterState, r: RunRecord) -> Blocked | None:
    """Why ``r`` may not be placed yet for the runs it depends on (see the module docstring)."""
    deps = r.run.spec.depends_on
    if not deps:
        return None
    scope = scope_of(r.name)
    for d in deps:
        other = s.runs.get(run_key(scope, d.run))
        if other is None:
            return waiting_for_run(d.run, None), False
        state = str(other.state)
        if other.state in FINAL_RUN_STATES:
            if state in WHEN_MET[d.when]:
                continue
            return dependency_unmet(d.run, state, d.when), True
        cycle = _cycle(s, r.name)
        if cycle:
            return f"Runs {', '.join(shown(n) for n in cycle)} wait for each other", True
        return waiting_for_run(d.run, state), False
    return None


def _cycle(s: ClusterState, start: str) -> list[str]:
    """The runs not finished from ``start`` back to it through their dependencies, or ``[]``."""
    path: list[str] = []
    seen: set[str] = set()

    def visit(name: str) -> bool:
        r = s.runs.get(name)
        if r is None or r.state in FINAL_RUN_STATES or not r.run.spec.depends_on:
            return False
        path.append(name)
        scope = scope_of(name)
        for d in r.run.spec.depends_on:
            key = run_key(scope, d.run)
            if key == start:
                return True
            if key not in seen:
                seen.add(key)
                if visit(key):
                    return True
        path.pop()
        return False

    return path if visit(start) else []
