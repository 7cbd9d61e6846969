"""``rerun``: a finished run runs again, the control plane's operation behind
``POST /runs/{name}/rerun`` (``astra rerun``, and the web console's Rerun).

* ``failed=False``: the run runs again whole, under its name (it is deleted, its processes long
  ended, and submitted again from the document it was given);
* ``failed=True`` (an array): a new array ``<run>-rerun-<k>`` of only the copies that did not
  complete, each seeing its original index (the document from ``reconciler.runspec.rerun``).

Only a finished run (``FINAL_RUN_STATES``) runs again: ``RerunRefused`` (the API's 409) says why
not, in one line. Each is one call of the engine's own writes (``delete``, ``submit``).

Must not touch: HTTP, SQL, the scheduler's rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.runspec.parse import parse_run
from reconciler.runspec.rerun import next_rerun_name, rerun_document, whole_rerun_document
from reconciler.runspec.vocabulary import FINAL_RUN_STATES, WorkerState

from .scopes import scope_of
from .store import NotFound

if TYPE_CHECKING:
    from .engine import Engine
    from .scheduler import RunRecord

__all__ = ["RerunRefused", "rerun"]


class RerunRefused(Exception):
    """The run cannot run again as asked; the message says why, in one line."""


def rerun(engine: Engine, key: str, *, failed: bool, now: float) -> RunRecord:
    """Run the run of ``key`` again (see the module docstring), in its own scope (workspace and
    cluster); the record of the run that starts.

    ``NotFound`` for no such run; ``RerunRefused`` for a run not finished, ``failed`` of a run
    that is no array or whose copies all completed; ``InvalidSpec`` when the new array's name
    is too long for a run."""
    scope = scope_of(key)
    name = key.removeprefix(scope.prefix)
    record = engine.state.runs.get(key)
    if record is None:
        raise NotFound(f"no run named {name}")
    if record.state not in FINAL_RUN_STATES:
        raise RerunRefused(
            f"run {name} is {record.state}: only a finished run runs again (wait for it, or cancel it)"
        )
    document = engine.meta[key].document
    if not failed:
        again = whole_rerun_document(document)
        parse_run(again)
        engine.delete(key, now)
        return engine.submit(again, now, scope)
    if not (document.get("spec") or {}).get("array"):
        raise RerunRefused(
            f"run {name} is no array: --failed reruns an array's failed copies; rerun it whole"
        )
    left = sorted(
        w.rank for w in engine.state.workers.values() if w.run == key and w.state != WorkerState.COMPLETED
    )
    if not left:
        raise RerunRefused(f"every copy of run {name} completed: there is nothing to rerun")
    taken = [k.removeprefix(scope.prefix) for k in engine.state.runs if scope_of(k) == scope]
    new = rerun_document(document, next_rerun_name(name, taken), left)
    parse_run(new)  # InvalidSpec: the new name too long, say
    return engine.submit(new, now, scope)
