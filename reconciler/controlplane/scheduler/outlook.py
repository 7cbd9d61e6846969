"""The scheduler's answer to "if these runs were submitted now": where each would start, or why it would wait.

Owns ``outlook``: the runs are submitted to a COPY of the state (a run of the same key, a
replace, leaves the copy first, with the places its workers hold), the copy is ticked with the
real ``plan_tick`` until it settles at ``now``, and each run's fate is read back: the shape its
workers were placed in (``2 machines x 8 GPUs, one NVLink domain``), the reason it waits (its own
reason as the scheduler gives it, with the GPUs free then when it waits for room), or the reason
it could never fit. Also ``shape_words``, a placement in words.

The runs already there that the scheduler has still to admit (a first apply's 10,000 runs, a
step admitting a slice at a time) are admitted in the copy too, as they are ahead in the queue,
but at most ``AHEAD`` of their workers: past that, the runs asked about are not served and
wait in the queue, as they would now, and say so (``AHEAD_WORDS``). The bound is a
``ticking.Admissions`` of what the runs asked about may make, and ``AHEAD`` more. Without it,
a dry run while 5,000 runs waited to be admitted made their 570,000 array copies in the copy:
6.8 s, an apply's review waiting for it.

Must not touch: the state it is given (only a copy of its records is changed), clocks (``now``
is an argument), I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Literal

from reconciler.runspec.models import Run
from reconciler.runspec.vocabulary import QUEUED, RunState

from .admission import admission_cost
from .records import PlaceWorker, RunRecord, WorkerRecord
from .state import ClusterState
from .tick import plan_tick
from .ticking import ADMIT_RUN_COST, Admissions

__all__ = ["Outlook", "copy_run", "copy_worker", "outlook", "shape_words"]

#: More ticks than this at one instant: the copy is read as it stands (a dry run never raises).
_TICKS_MAX = 1000
#: How many workers of the runs ahead still to admit the dry run makes at most (see the module
#: docstring): about 0.1 s of it.
AHEAD = 20_000
#: What a run the dry run did not admit for the runs ahead waits for, after its reason.
AHEAD_WORDS = "the scheduler is still admitting the runs ahead of it"
#: The network levels a shape is said to keep within, narrowest first, with their words.
_LEVELS = (("nvlink_domain", "one NVLink domain"), ("rack", "one rack"), ("fabric", "one fabric"))


@dataclass(frozen=True)
class Outlook:
    """One run's fate if submitted now: ``start`` (``words``: its shape), ``wait`` (``words``:
    why) or ``fail`` (``words``: why no placement could ever hold it)."""

    kind: Literal["start", "wait", "fail"]
    words: str


#: Every field of a record, in its ``__init__``'s order: a record made again of them is its
#: shallow copy (``copy.copy``'s, which goes through ``__reduce_ex__`` and cost a dry run over
#: 20,000 records 6 times as much; ``tests/controlplane/test_outlook_copy.py`` holds them equal).
_RUN_FIELDS = attrgetter(*(f.name for f in fields(RunRecord)))
_WORKER_FIELDS = attrgetter(*(f.name for f in fields(WorkerRecord)))


def copy_run(r: RunRecord) -> RunRecord:
    """A shallow copy of ``r``."""
    return RunRecord(*_RUN_FIELDS(r))


def copy_worker(w: WorkerRecord) -> WorkerRecord:
    """A shallow copy of ``w``."""
    return WorkerRecord(*_WORKER_FIELDS(w))


def _copy_of(state: ClusterState, leaving: set[str]) -> ClusterState:
    """A copy of ``state`` whose records can be changed, without the runs ``leaving``."""
    runs = {n: copy_run(r) for n, r in state.runs.items() if n not in leaving}
    workers = {n: copy_worker(w) for n, w in state.workers.items() if w.run not in leaving}
    out = ClusterState(state.inventory, runs, workers)
    out.carry_over(state)
    return out


def shape_words(state: ClusterState, places: dict[str, int]) -> str:
    """``places`` (machine → GPUs placed there) in words: ``2 machines x 8 GPUs, one NVLink domain``."""
    n = len(places)
    gpus = sorted(places.values(), reverse=True)
    machines = "1 machine" if n == 1 else f"{n} machines"
    if gpus[0] == 0:
        words = f"{machines}, no GPUs"
    elif len(set(gpus)) == 1:
        words = f"{machines} x {gpus[0]} GPU{'s' if gpus[0] != 1 else ''}"
    else:
        words = f"{machines}, {'+'.join(map(str, gpus))} GPUs"
    if n > 1:
        ms = [state.machines[m] for m in places]
        for attr, said in _LEVELS:
            values = {getattr(m, attr) for m in ms}
            if len(values) == 1 and None not in values:
                return f"{words}, {said}"
    return words


def _free_gpus(state: ClusterState) -> int:
    return sum(f.gpus for m, f in state.free.items() if m not in state.unusable and m not in state.down)


def outlook(
    state: ClusterState, runs: Sequence[tuple[str, Run]], now: float, *, ahead: int = AHEAD
) -> list[Outlook]:
    """Each of ``runs`` (key, run) as the scheduler would take it if submitted at ``now``, in
    order; ``ahead``: the workers made at most for the runs ahead still to admit."""
    keys = [k for k, _ in runs]
    s = _copy_of(state, set(keys))
    for key, run in runs:
        s.submit(run, now, key)
    admissions = Admissions(ahead + sum(admission_cost(run) for _, run in runs), ADMIT_RUN_COST)
    placed: dict[str, dict[str, int]] = {k: {} for k in keys}
    for _ in range(_TICKS_MAX):
        decisions = plan_tick(s, now, admissions=admissions)
        if not decisions:
            break
        s.apply(decisions, now)
        for d in decisions:
            if isinstance(d, PlaceWorker):
                run_key = s.workers[d.worker].run
                if run_key in placed:
                    on = placed[run_key]
                    on[d.machine] = on.get(d.machine, 0) + d.gpus
    return [
        _behind(s, k) if admissions.cut and _unserved(s, k, placed[k]) else _fate(s, k, placed[k])
        for k in keys
    ]


def _unserved(s: ClusterState, key: str, places: dict[str, int]) -> bool:
    """Whether the dry run never got to run ``key`` past its admission: nothing placed, and its
    reason still the one it was queued with."""
    return not places and s.runs[key].reason == QUEUED


def _behind(s: ClusterState, key: str) -> Outlook:
    """A run the dry run did not serve, the runs ahead of it still to admit past ``AHEAD``."""
    return Outlook("wait", f"{s.runs[key].reason} ({AHEAD_WORDS})")


def _fate(s: ClusterState, key: str, places: dict[str, int]) -> Outlook:
    r = s.runs[key]
    if r.state is RunState.FAILED and not places:
        return Outlook("fail", r.reason)
    if not places:
        reason = r.reason
        if reason.startswith("Waiting for room"):
            reason += f" ({_free_gpus(s)} GPUs are free now)"
        return Outlook("wait", reason)
    words = shape_words(s, places)
    total = len(s.run_workers[key])
    waiting = [s.workers[w] for w in s.pending[key]]
    if waiting:
        held = total - len(waiting)
        words = f"{held} of {total} workers at once, on {words}; the others wait: {waiting[0].reason}"
    return Outlook("start", words)
